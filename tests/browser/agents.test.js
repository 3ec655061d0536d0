// The Agents tab with real sub-agents (the demo model's `/spawn AGENT: TASK`): the tree with
// status, agent, task and last message; a sub-agent opened, its text seen streaming; it is
// interrupted and messaged; spawns and reports in the main timeline lead to it. With no
// sub-agents the tab says so (details.test.js).
//
// The main agent and its first sub-agent run on the demo model, whose directive spawns them;
// the last sub-agent ("helper") runs on the fake provider, whose answer the test holds, so it is
// certainly working while the test opens it, watches its text arrive and interrupts it.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, waitIdle, withUi } = require('./harness');

const AGENTS = `
[agents.default]
description = "the main agent, on the demo model"
model = "demo"
spawnable = ["default", "helper"]

[agents.helper]
description = "a sub-agent on the fake provider"
model = "m"
tools = ["list_dir"]
`;

test('the Agents tab shows the tree of sub-agents; one is opened while it streams, interrupted and messaged', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: AGENTS } }, async ({ page, fake }) => {
    // The main agent spawns a sub-agent, which spawns its own helper; the helper's answer waits
    // for the test.
    const gate = fake.hold({ text: 'never sent: the helper is interrupted first' });
    await page.fill('#message', 'Delegate this\n/spawn default: /spawn helper: write slowly');
    await page.press('#message', 'Enter');
    await page.waitForURL(/#\/c\/[^/]+$/);

    // The spawn reads as a card, not JSON, and leads to the sub-agent.
    const spawn = page.locator('#items .item.tool-call.tool-spawn-agent');
    await spawn.locator('.open-session').waitFor();
    assert.equal(await spawn.locator('.tool-name').textContent(), 'Sub-agent');
    assert.equal(await spawn.locator('.tool-task').textContent(), '/spawn helper: write slowly');
    assert.ok(!(await spawn.textContent()).includes('session_id'), await spawn.textContent());
    // Named by its agent, number and task, never by a session id.
    assert.equal(await spawn.locator('.tool-subject').textContent(), 'default #1 · /spawn helper: write slowly');
    assert.doesNotMatch(await spawn.textContent(), /\bs_/);

    await page.click('#tab-agents');
    const rows = page.locator('#agent-list li.agent-row');
    await rows.nth(2).waitFor();
    assert.equal(await page.textContent('#agents-count'), '2');
    assert.equal(await page.locator('#agents-empty').isVisible(), false);
    // The tree: each sub-agent under the one that spawned it, with its task.
    assert.deepEqual(await rows.evaluateAll((nodes) => nodes.map((n) => n.dataset.depth)), ['0', '1', '2']);
    assert.deepEqual(await rows.locator('.agent-name').allTextContents(), [
      'default (main agent)',
      'default #1 · /spawn helper: write slowly',
      'helper #1 · write slowly',
    ]);
    // A task the name holds whole is not repeated.
    assert.equal(await rows.locator('.agent-task').count(), 0);
    const slow = rows.nth(2);
    await gate.requested;
    await slow.locator('.badge', { hasText: 'working' }).waitFor();
    assert.deepEqual(await slow.locator('button').allTextContents(), ['Interrupt', 'Message', 'Open']);

    // Opened: its own history, its text streaming.
    await slow.locator('button', { hasText: 'Open' }).click();
    await page.locator('#session-crumb', { hasText: 'Viewing sub-agent helper #1 · write slowly' }).waitFor();
    await gate.write('Writing');
    const streaming = page.locator('#items .item.agent-message.status-running .md');
    await streaming.filter({ hasText: 'Writing' }).waitFor();
    const before = (await streaming.textContent()).length;
    await gate.write(' slowly, one piece at a time');
    await page.waitForFunction((length) => {
      const node = document.querySelector('#items .item.agent-message.status-running .md');
      return node && node.textContent.length > length;
    }, before);
    const task = page.locator('#items .item.user-message.from-agent').first();
    assert.equal(await task.locator('.who').textContent(), 'From the agent that started this one, default #1 · /spawn helper: write slowly');
    assert.equal(await task.locator('.md').textContent(), 'write slowly\n');

    // Interrupted from its view.
    await page.click('#interrupt');
    await page.locator('#items .item.agent-message.status-interrupted').waitFor();
    await page.click('#tab-agents');
    await slow.locator('.badge', { hasText: 'interrupted' }).waitFor();

    // Messaged: its reply (the fake echoes it) appears in its history.
    await slow.locator('button', { hasText: 'Message' }).click();
    assert.equal(await page.evaluate(() => document.activeElement.id), 'message');
    await page.keyboard.type('hello, helper');
    await page.keyboard.press('Enter');
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Echo: hello, helper' }).waitFor();
    await waitIdle(page);

    // Back to the main agent: its timeline holds the reports, each leading to its sub-agent.
    await page.locator('#session-crumb button', { hasText: 'Back to the main agent' }).click();
    await page.locator('#session-crumb').waitFor({ state: 'hidden' });
    const report = page.locator('#items .item.user-message.from-agent').first();
    await report.waitFor();
    // It names the sub-agent by its agent and task, not by a session id.
    assert.equal(await report.locator('.who').textContent(), 'Report from sub-agent default #1 · /spawn helper: write slowly');
    await report.locator('button', { hasText: 'Open the sub-agent' }).click();
    await page.locator('#session-crumb', { hasText: 'Viewing sub-agent default #1 · /spawn helper: write slowly' }).waitFor();
  }));

// Both agents on the fake provider: the main agent's second answer is held, so it works while
// its sub-agent reports; the sub-agent answers only once that second call has arrived, so its
// report cannot join the main agent's turn before it and waits.
const WAITING_REPORT_AGENTS = `
[agents.default]
description = "the main agent, on the fake provider"
model = "m"
tools = ["spawn_agent"]
spawnable = ["counter"]

[agents.counter]
description = "a sub-agent, on the fake provider too"
model = "m"
`;

test('a sub-agent report waiting for its parent names the sub-agent by its agent and task', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: WAITING_REPORT_AGENTS } }, async ({ page, fake }) => {
    fake.push({ tool: 'spawn_agent', args: { agent: 'counter', task: 'Count the files\nand say how many' } });
    const { gate, queued } = fake.held({ text: 'Done.' });
    // The main agent's second call and the sub-agent's first arrive in either order.
    const either = (body) =>
      JSON.stringify(body.messages).includes('Count the files') && !JSON.stringify(body.messages).includes('Hand the counting')
        ? { waitFor: gate.requested, then: { text: 'Three files.' } }
        : queued;
    fake.push(either, either);
    await page.fill('#message', 'Hand the counting to a sub-agent');
    await page.press('#message', 'Enter');
    await gate.requested;
    const report = page.locator('#pending-list li.pending-item.from-agent');
    await report.waitFor();
    assert.equal(await report.locator('.report-from').textContent(), 'Report from sub-agent counter #1 · Count the files');
    gate.release();
    await page.locator('#items .item.user-message.from-agent .who', { hasText: 'Report from sub-agent counter #1 · Count the files' }).waitFor();
    await waitIdle(page);
  }));

test('sub-agents of one agent are numbered in the order they started', { timeout: TEST_TIMEOUT }, () =>
  withUi({}, async ({ page }) => {
    // The built-in demo model spawns one `default` sub-agent per `/spawn` line.
    await page.fill('#message', '/spawn count the apples\n/spawn count the pears');
    await page.press('#message', 'Enter');
    await waitIdle(page);
    await page.click('#tab-agents');
    const rows = page.locator('#agent-list li.agent-row');
    await rows.nth(2).waitFor();
    const names = await rows.locator('.agent-name').allTextContents();
    const tasks = await rows.locator('.agent-task').allTextContents();
    assert.deepEqual(names, ['default (main agent)', 'default #1 · count the apples', 'default #2 · count the pears']);
    assert.deepEqual(tasks, []);
  }));

// The main agent on the fake provider spawns a reviewer, waits for it and lists its sub-agents;
// every card, the Agents tab and the report name the reviewer the same way.
const NAMING_AGENTS = `
[agents.default]
description = "the main agent, on the fake provider"
model = "m"
tools = ["spawn_agent", "wait_agents", "list_agents", "send_message"]
spawnable = ["reviewer"]

[agents.reviewer]
description = "a sub-agent, on the fake provider too"
model = "m"
`;

const REVIEW_TASK = 'Check the parser for off-by-one errors in the tokenizer and report back';
const REVIEWER = 'reviewer #1 · Check the parser for off-by-one errors…';

test('a sub-agent is named by its agent, number and task everywhere, never by its session id', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: NAMING_AGENTS } }, async ({ page, fake }) => {
    // The main agent's calls and the reviewer's arrive in either order: each reply is chosen by
    // whose request it is, and the main agent's next step by how many tool results it has.
    const reply = (body) => {
      const text = JSON.stringify(body.messages);
      if (!text.includes('Review the parser please')) return { text: 'The parser is fine.' };
      const results = body.messages.filter((m) => m.role === 'tool');
      const id = (/\\"session_id\\": *\\"(s_[^\\"]+)\\"/.exec(text) || [])[1];
      if (results.length === 0) return { tool: 'spawn_agent', args: { agent: 'reviewer', task: REVIEW_TASK } };
      if (results.length === 1) return { tool: 'wait_agents', args: { session_ids: [id] } };
      if (results.length === 2) return { tool: 'send_message', args: { session_id: id, text: 'Thanks, that is all.' } };
      if (results.length === 3) return { tool: 'list_agents', args: {} };
      return { text: 'All reviewed.' };
    };
    fake.push(...Array(12).fill(reply));
    await page.fill('#message', 'Review the parser please');
    await page.press('#message', 'Enter');
    await page.waitForURL(/#\/c\/[^/]+$/);
    // (The reviewer's reports may start another turn of the main agent afterwards.)
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'All reviewed.' }).first().waitFor();
    await waitIdle(page);

    const card = (tool) => page.locator(`#items .item.tool-call.tool-${tool}`).first();
    assert.equal(await card('spawn-agent').locator('.tool-subject').textContent(), REVIEWER);
    assert.equal(await card('wait-agents').locator('.tool-subject').textContent(), REVIEWER);
    assert.match(await card('wait-agents').locator('.tool-summary').textContent(), /^waited [\d.]+ s · 1 sub-agent$/);
    assert.equal(await card('wait-agents').locator('.tool-agents li').textContent(), `${REVIEWER} — idle · The parser is fine.`);
    assert.equal(await card('send-message').locator('.tool-subject').textContent(), REVIEWER);
    assert.equal(await card('send-message').locator('.tool-task').textContent(), 'Thanks, that is all.');
    assert.equal(await card('list-agents').locator('.tool-agents li .tool-agent-name').textContent(), REVIEWER);
    // The reports name it too, in their head and in the service's words above the answer.
    const report = page.locator('#items .item.user-message.from-agent').first();
    assert.equal(await report.locator('.who').textContent(), `Report from sub-agent ${REVIEWER}`);
    const said = await report.locator('.md').textContent();
    assert.ok(said.startsWith(`Report from sub-agent ${REVIEWER}: its turn completed.`), said);
    // No session id anywhere in the history.
    assert.doesNotMatch(await page.textContent('#items'), /\bs_[A-Za-z0-9]/);

    // The Agents tab: the same name, and the whole task under it (the name holds its first words).
    await page.click('#tab-agents');
    const row = page.locator('#agent-list li.agent-row[data-depth="1"]');
    await row.waitFor();
    assert.equal(await row.locator('.agent-name').textContent(), REVIEWER);
    assert.equal(await row.locator('.agent-task').textContent(), `Task: ${REVIEW_TASK}`);
    assert.doesNotMatch(await page.textContent('#agent-list'), /\bs_[A-Za-z0-9]/);
    await row.locator('button', { hasText: 'Open' }).click();
    await page.locator('#session-crumb', { hasText: `Viewing sub-agent ${REVIEWER}` }).waitFor();
  }));
