// What a conversation costs, when it goes wrong: a spending limit reached with `on_budget =
// "ask"` shows as a card that lets the turn go on or stops it (never a rule to remember), and a
// model that fails for good hands the turn to its fallback, which a line says while it runs.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, checkAxe, screenshot, startConversation, waitIdle, withUi } = require('./harness');

const ASKING_AGENT = `
[agents.default]
description = "test agent"
model = "m"
tools = ["list_dir"]
max_turn_model_calls = 1
on_budget = "ask"
`;

test('a reached spending limit asks to go on, and going on finishes the turn', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: ASKING_AGENT } }, async ({ page, fake }) => {
    fake.push({ tool: 'list_dir', args: {} }, { text: 'Listed, past the limit.' });
    await startConversation(page, 'list the files');
    const card = page.locator('.approval.asking');
    await card.waitFor();
    assert.equal(await card.locator('.approval-title').textContent(), 'Spending limit reached: go on?');
    assert.match(await card.locator('.approval-reason').textContent(), /reaching its limit max_turn_model_calls = 1 .*: continue past 1\?$/);
    // Nothing to remember: only going on once, or stopping.
    assert.deepEqual(
      await card.locator('button[data-decision]').evaluateAll((buttons) => buttons.map((button) => button.textContent)),
      ['Go on', 'Stop'],
    );
    // The card follows the notice that says why the turn waits.
    const notice = page.locator('#items .item.notice', { hasText: 'A spending limit was reached' });
    await notice.waitFor();
    await checkAxe(page);
    await screenshot(page, 'budget-ask');
    await card.locator('button[data-decision="allow_once"]').click();
    await page.locator('#items .item.agent-message', { hasText: 'Listed, past the limit.' }).waitFor();
    await waitIdle(page);
    assert.equal(fake.requests.length, 2);
  }));

test('a model that fails for good hands the turn to its fallback, and a line says so', { timeout: TEST_TIMEOUT }, () =>
  withUi(
    { fake: { retry: { initialDelayMs: 10, maxDelayMs: 10 }, agents: `fallback = ["demo"]\n${ASKING_AGENT.replace(/max_turn.*\n|on_budget.*\n/g, '')}` } },
    async ({ page, fake }) => {
      let failures = 0;
      const failing = () => {
        failures += 1;
        return { status: 503, message: 'the main model is overloaded' };
      };
      for (let i = 0; i < 10; i++) fake.push(failing);
      await page.evaluate(() => {
        window.__lines = new Set();
        new MutationObserver(() => {
          for (const line of document.querySelectorAll('#status-lines .line.fallback')) window.__lines.add(line.textContent);
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
      });
      await startConversation(page, 'say something');
      await page.locator('#items .item.agent-message.status-completed').waitFor();
      await waitIdle(page);
      assert.equal(failures, 10, 'every attempt of the main model was made first');
      const lines = await page.evaluate(() => [...window.__lines]);
      assert.equal(lines.length, 1, JSON.stringify(lines));
      assert.match(lines[0], /^m is unavailable \(.*the main model is overloaded.*\): demo answers the rest of this turn\.$/);
      // Gone with the turn's end; the turn's figures stay.
      assert.equal(await page.locator('#status-lines .line.fallback').count(), 0);
      await page.locator('#items .turn-tokens').waitFor();
      await screenshot(page, 'fallback-done');
    },
  ));
