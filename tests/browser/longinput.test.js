// Long input. A 78,000-character message is shown folded (its first lines and "Show all"), and
// sending it never blocks the page's main thread for long; a message larger than the model's
// context window makes the meter say what happens next.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, checkAxe, inEachView, screenshot, startConversation, waitForReply, waitIdle, withUi } = require('./harness');

// 78,000 characters in lines of about 80, like a pasted log.
function longMessage() {
  let text = '';
  for (let i = 1; text.length < 78_000; i++) text += `line ${i}: the quick brown fox jumps over the lazy dog, again and again and again\n`;
  return text.slice(0, 78_000);
}

test('a 78,000-character message is shown folded with Show all, and sending it keeps the page responsive', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, raisePriority }) => {
    await startConversation(page, 'warm up');
    await waitForReply(page, 'warm up');
    const text = longMessage();
    // Put in the box as a paste would (Playwright's fill types it through the editing commands,
    // which takes seconds for this much text and is not the page's own work).
    await page.evaluate((value) => {
      const box = document.getElementById('message');
      box.value = value;
      box.dispatchEvent(new Event('input', { bubbles: true }));
    }, text);
    const priority = raisePriority();
    await page.evaluate(() => {
      window.__longTasks = [];
      new PerformanceObserver((list) => {
        for (const entry of list.getEntries()) window.__longTasks.push(Math.round(entry.duration));
      }).observe({ type: 'longtask' });
    });
    await page.press('#message', 'Enter');
    const message = page.locator('#items .item.user-message').nth(1);
    const body = message.locator('.text.long-text');
    await body.waitFor();
    await waitForReply(page, 'line 1: the quick brown fox jumps over the lazy dog, again and again and again');
    // Two frames after the reply: whatever the send caused has been laid out and painted.
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    const longTasks = await page.evaluate(() => window.__longTasks);
    const longest = Math.max(0, ...longTasks);
    console.log(`# sending a 78,000-character message: longest main-thread task ${longest} ms (long tasks ${JSON.stringify(longTasks)}; browser priority: ${priority})`);
    assert.ok(longest < 250, `no main-thread task over 250 ms while the message was sent and shown: ${JSON.stringify(longTasks)}`);

    // Folded: the first 40 lines, and a button that says how much there is.
    const shown = await body.textContent();
    assert.ok(shown.length < 4_100, `folded to ${shown.length} characters`);
    assert.ok(shown.startsWith('line 1: the quick brown fox'));
    assert.match(shown, /line 40: .*…$/);
    const button = message.getByRole('button', { name: /^Show all \(965 lines, 78,000 characters\)$/ });
    assert.equal(await button.getAttribute('aria-expanded'), 'false');
    await message.scrollIntoViewIfNeeded();
    await screenshot(page, 'long-message-folded');

    await button.click();
    const less = message.getByRole('button', { name: 'Show less' });
    await less.waitFor();
    assert.equal(await less.getAttribute('aria-expanded'), 'true');
    assert.equal(await body.textContent(), text);
    await less.click();
    await message.getByRole('button', { name: /^Show all/ }).waitFor();
    assert.ok((await body.textContent()).length < 4_100);

    // From the stored history too (a reload).
    await page.reload();
    await waitIdle(page);
    await page.locator('#items .item.user-message').nth(1).getByRole('button', { name: /^Show all/ }).waitFor();
  }));

// One agent on a model with a small context window (2,000 tokens).
const SMALL_WINDOW = `
[models.small]
provider = "fake"
name = "fake-model"
context_window = 2000
max_output_tokens = 200

[agents.default]
description = "test agent"
model = "small"
tools = ["shell", "read_file", "write_file", "list_dir"]
`;

test('past the whole context window the meter says what happens next', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: SMALL_WINDOW } }, async ({ page, fake }) => {
    // The fake provider reports the same small figures for every request: the meter is read
    // while the model call is held, when it shows the service's own count of the message.
    const gate = fake.hold({ text: 'Read it all.' });
    await startConversation(page, longMessage().slice(0, 20_000));
    await gate.requested;
    const over = page.locator('#usage-over');
    await over.waitFor();
    assert.match(await over.textContent(), /Over the context window: the older history will be summarized before the next model call; if what remains still does not fit, the model provider may refuse the request\./);
    assert.match(await page.textContent('#usage-explanation'), /Over the context window/);
    const meter = page.locator('#usage-bar');
    assert.equal(await meter.getAttribute('aria-valuenow'), '2000');
    assert.match(await meter.getAttribute('aria-valuetext'), /of 2,000 tokens \((\d{3,})%\)/);
    await inEachView(page, async (size, scheme) => {
      if (size === 'phone') assert.equal(await page.locator('#usage-over .usage-over-short').isVisible(), true);
      await screenshot(page, `meter-over-${size}-${scheme}`);
      await checkAxe(page, `the meter past the window, ${size} ${scheme}`);
    });
    // Within the window again (the provider's figures): the note goes.
    gate.release();
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Read it all.' }).waitFor();
    await waitIdle(page);
    await over.waitFor({ state: 'hidden' });
  }));
