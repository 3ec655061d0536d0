// The Agents tab, against API.md's sub-agent contract (GET …/sessions, POST …/sessions/{id}/
// interrupt). The service does not run sub-agents yet (issue 13), so this test answers those two
// calls itself, the way API.md says the service will, and checks what the tab makes of them:
// the tree with status, agent, model, task and last message, and an interrupt sent to the right
// session. With no sub-agents the tab says so (details.test.js).
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, conversationId, startConversation, waitForReply, withUi } = require('./harness');

test('the Agents tab lists sub-agents as a tree with status, task and last message, and interrupts one', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await startConversation(page, 'delegate');
    await waitForReply(page, 'delegate');
    const id = conversationId(page);
    const root = await page.evaluate(async (conversation) => (await (await fetch(`/api/conversations/${conversation}`)).json()).root_session_id, id);
    const session = (fields) => ({ parent_id: null, model: 'demo', task: null, created_at: '2026-12-03T10:00:00Z', last_message: null, ...fields });
    const sessions = [
      session({ id: root, agent: 'default', status: 'idle', last_message: 'I asked two helpers.' }),
      session({ id: 's_reviewer', parent_id: root, agent: 'reviewer', status: 'running', task: 'Check the change in main.rs' }),
      session({ id: 's_tester', parent_id: 's_reviewer', agent: 'tester', status: 'interrupted', task: 'Run the tests', last_message: 'Two tests fail.' }),
    ];
    const interrupted = [];
    await page.route(`**/api/conversations/${id}/sessions`, (route) => route.fulfill({ json: { sessions } }));
    await page.route(`**/api/conversations/${id}/sessions/*/interrupt`, (route) => {
      interrupted.push(new URL(route.request().url()).pathname);
      route.fulfill({ json: { interrupted: true } });
    });

    await page.click('#tab-agents');
    const rows = page.locator('#agent-list li.agent-row');
    await rows.nth(2).waitFor();
    assert.equal(await page.locator('#agents-empty').isVisible(), false);
    assert.equal(await page.textContent('#agents-count'), '2');

    const [main, reviewer, tester] = [rows.nth(0), rows.nth(1), rows.nth(2)];
    assert.equal(await main.locator('.agent-name').textContent(), 'default (main agent)');
    assert.equal(await reviewer.locator('.agent-name').textContent(), 'reviewer');
    assert.equal(await reviewer.locator('.badge').textContent(), 'working');
    assert.match(await reviewer.locator('.agent-task').textContent(), /Check the change in main\.rs/);
    assert.equal(await tester.locator('.badge').textContent(), 'interrupted');
    assert.match(await tester.locator('.agent-last').textContent(), /Two tests fail\./);
    // The tree: each sub-agent under the one that spawned it.
    assert.deepEqual(await rows.evaluateAll((nodes) => nodes.map((n) => n.dataset.depth)), ['0', '1', '2']);
    // Only a working sub-agent can be interrupted; each sub-agent can be opened or messaged.
    assert.deepEqual(await reviewer.locator('button').allTextContents(), ['Interrupt', 'Message', 'Open']);
    assert.deepEqual(await tester.locator('button').allTextContents(), ['Message', 'Open']);

    const sent = page.waitForRequest((request) => request.url().endsWith('/interrupt') && request.method() === 'POST');
    await reviewer.locator('button', { hasText: 'Interrupt' }).click();
    await sent;
    assert.deepEqual(interrupted, [`/api/conversations/${id}/sessions/s_reviewer/interrupt`]);
  }));
