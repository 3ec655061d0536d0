// Tool calls read as tools, not JSON. A shell call shows its command and its live output;
// read_file, write_file and list_dir show their path and a summary, a write shows what changed
// (a last line without a newline marked);
// long output collapses with "Show all"; each card says whether the tool ran, failed (with its
// exit code), was interrupted, or was denied (a decision, shown neutral, not as a failure).
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { TEST_TIMEOUT, checkAxe, startConversation, waitIdle, withUi } = require('./harness');

test('a shell card shows its command, its output live, and collapses long output', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake, server }) => {
    // The command waits for a file the test writes, so its first line is seen while it runs.
    let release;
    const released = new Promise((resolve) => (release = resolve));
    fake.push(
      { tool: 'shell', args: { command: 'echo first-line; while [ ! -e go ]; do sleep 0.05; done; seq 1 40' } },
      { tool: 'shell', args: { command: 'echo on stderr >&2; exit 3' } },
      { waitFor: released, then: { text: 'Both commands ran.' } },
    );
    await startConversation(page, 'run things');

    const live = page.locator('#items .item.tool-call.tool-shell').first();
    await live.locator('.tool-subject', { hasText: '$ echo first-line;' }).waitFor();
    // Live output, while the command still runs.
    await live.locator('pre.output', { hasText: 'first-line' }).waitFor();
    assert.equal(await live.locator('.tool-state').textContent(), 'running');
    assert.equal(await live.locator('.tool-state.state-running').count(), 1);
    // No JSON anywhere on the card.
    assert.ok(!(await live.textContent()).includes('{"command"'), await live.textContent());

    fs.writeFileSync(path.join(server().cwd, 'go'), '');
    await live.locator('.tool-state.state-ran', { hasText: 'ran · exit 0' }).waitFor();
    // 41 lines: collapsed, with a button that shows them all.
    const showAll = live.locator('button.show-all');
    await showAll.waitFor();
    assert.equal(await showAll.textContent(), 'Show all 41 lines');
    const output = live.locator('pre.output');
    assert.ok(await output.evaluate((pre) => pre.classList.contains('collapsed') && pre.clientHeight < pre.scrollHeight));
    await showAll.click();
    assert.equal(await showAll.textContent(), 'Show less');
    assert.ok(await output.evaluate((pre) => !pre.classList.contains('collapsed') && pre.scrollHeight <= pre.clientHeight + 1));

    // A command that fails says so, with its exit code.
    const failed = page.locator('#items .item.tool-call.tool-shell').nth(1);
    await failed.locator('.tool-state.state-failed', { hasText: 'failed · exit 3' }).waitFor();
    assert.equal(await failed.locator('pre.output').textContent(), 'on stderr\n');
    release();
    await page.locator('#items .item.agent-message', { hasText: 'Both commands ran.' }).waitFor();
  }));

test('file tools show their path and a summary, and a write shows what changed', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    fake.push(
      { tool: 'write_file', args: { path: 'notes.txt', content: 'alpha\nbeta\ngamma\n' } },
      { tool: 'read_file', args: { path: 'notes.txt' } },
      { tool: 'write_file', args: { path: 'notes.txt', content: 'alpha\nBETA\ngamma\ndelta\n' } },
      { tool: 'list_dir', args: {} },
      { tool: 'read_file', args: { path: 'missing.txt' } },
      { text: 'Files handled.' },
    );
    await startConversation(page, 'work with files');
    await page.locator('#items .item.agent-message', { hasText: 'Files handled.' }).waitFor();
    await waitIdle(page);

    const cards = page.locator('#items .item.tool-call');
    assert.equal(await cards.count(), 5);

    // A new file: its path, how much was written, every line added.
    const created = cards.nth(0);
    assert.equal(await created.locator('.tool-name').textContent(), 'Write file');
    assert.equal(await created.locator('.tool-subject').textContent(), 'notes.txt');
    assert.match(await created.locator('.tool-summary').textContent(), /^3 lines written · 17 bytes/);
    assert.deepEqual(await created.locator('.diff-line.diff-add').allTextContents(), ['+alpha\n', '+beta\n', '+gamma\n']);
    assert.equal(await created.locator('.tool-state').textContent(), 'done');

    const read = cards.nth(1);
    assert.equal(await read.locator('.tool-name').textContent(), 'Read file');
    assert.equal(await read.locator('.tool-subject').textContent(), 'notes.txt');
    assert.equal(await read.locator('.tool-summary').textContent(), '3 lines · 17 bytes');

    // A change to a file the conversation has seen: a line diff.
    const changed = cards.nth(2);
    assert.equal(await changed.locator('.tool-summary').textContent(), '+2 −1 lines');
    assert.deepEqual(await changed.locator('.diff-line.diff-del').allTextContents(), ['−beta\n']);
    assert.deepEqual(await changed.locator('.diff-line.diff-add').allTextContents(), ['+BETA\n', '+delta\n']);

    const listed = cards.nth(3);
    assert.equal(await listed.locator('.tool-name').textContent(), 'List directory');
    assert.equal(await listed.locator('.tool-subject').textContent(), 'working directory');
    assert.equal(await listed.locator('.tool-summary').textContent(), '1 entry (0 folders, 1 file)');

    // A tool error: failed, with the reason.
    const missing = cards.nth(4);
    await missing.locator('.tool-state.state-failed', { hasText: 'failed' }).waitFor();
    assert.match(await missing.locator('.tool-summary').textContent(), /no such file: missing.txt/);

    // Nothing is shown as JSON.
    for (let i = 0; i < 5; i++) assert.ok(!(await cards.nth(i).textContent()).includes('{"'), await cards.nth(i).textContent());
  }));

test('an interrupted command says so on its card', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    fake.push({ tool: 'shell', args: { command: 'echo started; sleep 30' } });
    await startConversation(page, 'run something long');
    const card = page.locator('#items .item.tool-call.tool-shell');
    await card.locator('pre.output', { hasText: 'started' }).waitFor();
    await page.click('#interrupt');
    await card.locator('.tool-state.state-interrupted', { hasText: 'interrupted' }).waitFor();
    await waitIdle(page);
    assert.match(await card.locator('pre.output').textContent(), /started\n\[command interrupted\]/);
  }));

test('a call the rules refuse reads denied, neutral, not failed in red', { timeout: TEST_TIMEOUT }, () =>
  withUi(
    {
      fake: {
        agents: `
[agents.default]
description = "test agent whose rules refuse rm"
model = "m"
tools = ["shell", "write_file"]
[agents.default.permissions]
write_file = "deny"
[agents.default.permissions.shell_rules]
"rm *" = "deny"
`,
      },
    },
    async ({ page, fake, server }) => {
      fs.writeFileSync(path.join(server().cwd, 'keep.txt'), 'kept\n');
      fake.push(
        { tool: 'shell', args: { command: 'rm keep.txt' } },
        { tool: 'write_file', args: { path: 'new.txt', content: 'never\n' } },
        { text: 'Both were refused.' },
      );
      await startConversation(page, 'clean up');
      await page.locator('#items .item.agent-message', { hasText: 'Both were refused.' }).waitFor();
      await waitIdle(page);
      const cards = page.locator('#items .item.tool-call');
      for (const card of [cards.nth(0), cards.nth(1)]) {
        assert.equal(await card.locator('.tool-state').textContent(), 'denied');
        assert.equal(await card.evaluate((node) => node.classList.contains('state-denied') && !node.classList.contains('state-failed')), true);
        // Neither the badge nor the card's edge is the colour of a failure.
        const colours = await card.evaluate((node) => {
          const probe = document.createElement('span');
          probe.style.color = 'var(--danger)';
          document.body.append(probe);
          const danger = getComputedStyle(probe).color;
          probe.remove();
          return { danger, badge: getComputedStyle(node.querySelector('.tool-state')).color, edge: getComputedStyle(node).borderLeftColor };
        });
        assert.notEqual(colours.badge, colours.danger);
        assert.notEqual(colours.edge, colours.danger);
      }
      // The write's reason is told, not as an error.
      assert.equal(await cards.nth(1).locator('.tool-summary .tool-denied').count(), 1);
      assert.equal(await cards.nth(1).locator('.tool-error').count(), 0);
      assert.equal(fs.readFileSync(path.join(server().cwd, 'keep.txt'), 'utf8'), 'kept\n');
      assert.equal(fs.existsSync(path.join(server().cwd, 'new.txt')), false);
    },
  ));

test('a file written without a newline at its end shows a small mark on its last line', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    fake.push(
      { tool: 'write_file', args: { path: 'eol.txt', content: 'one\ntwo' } },
      { tool: 'write_file', args: { path: 'eol.txt', content: 'one\ntwo\n' } },
      { text: 'Written twice.' },
    );
    await startConversation(page, 'write it twice');
    await page.locator('#items .item.agent-message', { hasText: 'Written twice.' }).waitFor();
    await waitIdle(page);
    const cards = page.locator('#items .item.tool-call');
    // New: its last line has no newline after it.
    assert.deepEqual(await cards.nth(0).locator('.diff-line.diff-add').allTextContents(), ['+one\n', '+two no newline at end of file\n']);
    assert.equal(await cards.nth(0).locator('.diff-line.diff-add .no-eol').count(), 1);
    // Rewritten with the newline: the old last line (marked) goes, the new one (unmarked) comes.
    const changed = cards.nth(1);
    assert.deepEqual(await changed.locator('.diff-line.diff-del').allTextContents(), ['−two no newline at end of file\n']);
    assert.deepEqual(await changed.locator('.diff-line.diff-add').allTextContents(), ['+two\n']);
    await checkAxe(page, 'the no-newline mark');
  }));
