// Export: the conversation's Export button downloads it as a Markdown file named after its
// title, with the messages, the answers and the tool calls.
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
