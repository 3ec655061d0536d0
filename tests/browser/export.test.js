// Export: the conversation's Export button downloads it as a Markdown file named after its
// title, with the messages, the answers and the tool calls. Also: times show their date once
// they are not today.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { TEST_TIMEOUT, startConversation, waitIdle, withUi } = require('./harness');

test('Export downloads the conversation as Markdown', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await startConversation(page, 'Export me\n/shell echo exported-from-the-browser');
    await page.locator('#items .item.tool-call.tool-shell pre.output', { hasText: 'exported-from-the-browser' }).waitFor();
    await waitIdle(page);

    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
    assert.equal(download.suggestedFilename(), 'Export_me.md');
    const document = fs.readFileSync(await download.path(), 'utf8');
    assert.ok(document.startsWith('# Export me\n'), document);
    assert.ok(document.includes('## You\n\nExport me\n/shell echo exported-from-the-browser\n'), document);
    assert.ok(document.includes('```text\nexported-from-the-browser\n```'), document);
  }));

test('a time shows its date once it is not today', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await startConversation(page, 'What time is it?');
    const shown = await page.evaluate(async () => {
      const { clockTime } = await import('/assets/dom.js');
      const now = Date.now();
      const day = 86400000;
      const expect = (ms, options) => new Date(ms).toLocaleDateString([], options);
      return {
        now: clockTime(now),
        earlier: clockTime(now - 3 * day),
        lastYear: clockTime(now - 400 * day),
        lastYearDate: expect(now - 400 * day, { year: 'numeric', month: 'short', day: 'numeric' }),
      };
    });
    assert.ok(!shown.now.includes(','), shown.now);
    // Three days ago is this year unless it is early January: either way the date leads.
    assert.ok(shown.earlier.includes(', '), shown.earlier);
    assert.ok(shown.lastYear.startsWith(`${shown.lastYearDate}, `), JSON.stringify(shown));
  }));
