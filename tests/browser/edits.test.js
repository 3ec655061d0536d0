// Edits read as what they changed: an `edit_file` card shows its file and a line diff of the
// replaced text, an `apply_patch` card each file of the patch with its own diff; a failed edit
// says why. Nothing is shown as JSON.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { TEST_TIMEOUT, startConversation, waitIdle, withUi } = require('./harness');

// A model offered edit_file and, beside it, the apply_patch function.
const AGENTS = `
[models.p]
provider = "fake"
name = "fake-model"
context_window = 100000
max_output_tokens = 1000
edit_tool = "apply_patch"

[agents.default]
description = "test agent"
model = "p"
tools = ["shell", "read_file", "write_file", "edit_file", "list_dir"]
`;

const PATCH = [
  '*** Begin Patch',
  '*** Update File: notes.txt',
  '@@',
  ' BETA',
  '-gamma',
  '+GAMMA',
  '*** Add File: docs/new.txt',
  '+fresh',
  '*** End Patch',
  '',
].join('\n');

test('an edit card shows its file and diff, a patch card each of its files', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: AGENTS } }, async ({ page, fake, server }) => {
    fs.writeFileSync(path.join(server().cwd, 'notes.txt'), 'alpha\nbeta\ngamma\n');
    fake.push(
      { tool: 'edit_file', args: { path: 'notes.txt', old_string: 'beta', new_string: 'BETA' } },
      { tool: 'apply_patch', args: { input: PATCH } },
      { tool: 'edit_file', args: { path: 'notes.txt', old_string: 'nowhere', new_string: 'x' } },
      { text: 'Edited.' },
    );
    await startConversation(page, 'edit the notes');
    await page.locator('#items .item.agent-message', { hasText: 'Edited.' }).waitFor();
    await waitIdle(page);
    assert.equal(fs.readFileSync(path.join(server().cwd, 'notes.txt'), 'utf8'), 'alpha\nBETA\nGAMMA\n');

    const cards = page.locator('#items .item.tool-call');
    assert.equal(await cards.count(), 3);

    const edit = cards.nth(0);
    assert.equal(await edit.locator('.tool-name').textContent(), 'Edit file');
    assert.equal(await edit.locator('.tool-subject').textContent(), 'notes.txt');
    assert.equal(await edit.locator('.tool-summary').textContent(), 'notes.txt edited · +1 −1 lines');
    assert.deepEqual(await edit.locator('.diff-line.diff-del').allTextContents(), ['−beta\n']);
    assert.deepEqual(await edit.locator('.diff-line.diff-add').allTextContents(), ['+BETA\n']);

    const patch = cards.nth(1);
    assert.equal(await patch.locator('.tool-name').textContent(), 'Apply patch');
    assert.equal(await patch.locator('.tool-subject').textContent(), '2 files');
    assert.deepEqual(await patch.locator('.tool-summary').allTextContents(), ['notes.txt edited · +1 −1 lines', 'docs/new.txt created · +1 −0 lines']);
    assert.deepEqual(await patch.locator('pre.diff').nth(0).locator('.diff-line').allTextContents(), [' BETA\n', '−gamma\n', '+GAMMA\n']);
    assert.deepEqual(await patch.locator('pre.diff').nth(1).locator('.diff-line.diff-add').allTextContents(), ['+fresh\n']);

    // An edit that did not apply says why, on a failed card.
    const failed = cards.nth(2);
    await failed.locator('.tool-state.state-failed').waitFor();
    assert.match(await failed.locator('.tool-summary').textContent(), /old_string/);

    for (let i = 0; i < 3; i++) assert.ok(!(await cards.nth(i).textContent()).includes('{"'), await cards.nth(i).textContent());
    if (process.env.SCREENSHOTS) await page.screenshot({ path: path.join(process.env.SCREENSHOTS, 'edits.png'), fullPage: true });
  }));
