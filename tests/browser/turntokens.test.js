// Per-turn token counts: each finished turn this tab watched shows how much the context grew
// while it ran (the service counts the context, not turns; the tooltip says so), placed after
// the turn's last block, and still shown after a reload.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, screenshot, startConversation, waitIdle, withUi } = require('./harness');

// The figure of the turn whose user message says `text`: its text as a number of tokens, and
// whether it is the turn's last block.
async function turnFigure(page, text) {
  const message = page.locator('#items .item.user-message', { hasText: text });
  const turnId = await message.getAttribute('data-turn');
  const line = page.locator(`#items .turn-tokens[data-turn="${turnId}"]`);
  await line.waitFor();
  const shown = await line.textContent();
  const match = /^(\d+(?:\.\d)?)(k?) tokens$/.exec(shown);
  assert.ok(match, shown);
  const placed = await line.evaluate((node) => {
    const next = node.nextElementSibling;
    const previous = node.previousElementSibling;
    return { next: next && next.dataset.turn, previous: previous && previous.dataset.turn };
  });
  return { turnId, tokens: Number(match[1]) * (match[2] ? 1000 : 1), title: await line.getAttribute('title'), placed };
}

test('each finished turn shows the tokens it added to the context, after its last block, also after a reload', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    // The first turn streams slowly, so the page sees it running.
    await startConversation(page, '/sleep 100\na short question');
    await page.locator('#items .item.agent-message.status-completed').waitFor();
    await waitIdle(page);
    const first = await turnFigure(page, 'a short question');
    assert.ok(first.tokens > 0);
    assert.deepEqual(first.placed, { next: null, previous: first.turnId }, 'the figure closes its turn');
    assert.match(first.title, /^The context grew by about [\d,]+ tokens during this turn: the context meter's figure after it ended minus its figure when it started \(or when this page first saw it running\)\. The service counts the context, not turns/);

    // A long answer adds more.
    const long = Array.from({ length: 60 }, (_, n) => `Line ${n + 1} of a long text the demo model repeats back.`).join('\n');
    await page.fill('#message', `/echo\n${long}`);
    await page.press('#message', 'Enter');
    await page.locator('#items .item.agent-message', { hasText: 'Line 60 of a long text' }).waitFor();
    await waitIdle(page);
    const second = await turnFigure(page, 'Line 1 of a long text');
    assert.ok(second.tokens > first.tokens + 500, `${second.tokens} > ${first.tokens} + 500`);
    const firstNow = await turnFigure(page, 'a short question');
    assert.equal(firstNow.placed.next, second.turnId, 'the first figure stays with the first turn');
    await screenshot(page, 'turn-tokens');

    await page.reload();
    await page.locator('#main[data-state="idle"]').waitFor();
    assert.equal((await turnFigure(page, 'a short question')).tokens, first.tokens);
    assert.equal((await turnFigure(page, 'Line 1 of a long text')).tokens, second.tokens);
  }));
