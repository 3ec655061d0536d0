// #main's data-state, which the other tests wait on (waitIdle, waitRunning), tells the truth:
// "loading" while the conversation's history is not on the page yet, "running" while a turn
// runs, and "idle" only once the history is shown and no turn runs.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, startConversation, waitIdle, waitRunning, withUi } = require('./harness');

test('data-state is "loading" until the history is shown, "running" during a turn, then "idle"', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    await startConversation(page, 'hello');
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Echo: hello' }).waitFor();
    await waitIdle(page);

    // From the next load on: each state the page takes, with the finished answers it shows then.
    await page.addInitScript(() => {
      window.__states = [];
      new MutationObserver(() => {
        const main = document.getElementById('main');
        const state = main && main.dataset.state;
        const last = window.__states[window.__states.length - 1];
        if (state && (!last || last.state !== state)) {
          window.__states.push({ state, answers: document.querySelectorAll('#items .item.agent-message.status-completed').length });
        }
      }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-state'] });
    });
    // The history is held back: the page must say it is loading, however long that takes.
    let releaseHistory;
    const history = new Promise((resolve) => (releaseHistory = resolve));
    await page.route(/\/api\/conversations\/[^/]+\/items\?/, async (route) => {
      await history;
      await route.continue();
    });
    await page.reload();
    await page.locator('#items p.loading', { hasText: 'Loading history…' }).waitFor();
    assert.equal(await page.getAttribute('#main', 'data-state'), 'loading');
    releaseHistory();
    await waitIdle(page);
    assert.equal(await page.locator('#items .item.agent-message', { hasText: 'Echo: hello' }).count(), 1);

    // A turn: "running" while its answer is held, "idle" once it is shown.
    const gate = fake.hold({ text: 'Done.' });
    await page.fill('#message', 'work on it');
    await page.press('#message', 'Enter');
    await gate.requested;
    await waitRunning(page);
    assert.equal(await page.locator('#running-indicator').isVisible(), true);
    gate.release();
    await waitIdle(page);
    assert.equal(await page.locator('#running-indicator').isVisible(), false);
    assert.deepEqual(await page.evaluate(() => window.__states), [
      { state: 'loading', answers: 0 },
      { state: 'idle', answers: 1 },
      { state: 'running', answers: 1 },
      { state: 'idle', answers: 2 },
    ]);
  }));
