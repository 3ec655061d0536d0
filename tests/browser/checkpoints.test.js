// What the agent changed in the working directory: a turn that changed files says how many and
// opens its diff; "Restart from here" offers to restore them (what a dry run would restore is
// asked first, and the files it would restore are named), and the restore can be undone.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { TEST_TIMEOUT, checkAxe, sendMessage, startConversation, waitForReply, withUi } = require('./harness');

test('a turn shows the files it changed; "Restart from here" restores them, and undo puts them back', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, root }) => {
    const notes = path.join(root, 'work', 'notes.txt');
    fs.writeFileSync(notes, 'old line\n');
    await startConversation(page, 'hello');
    await waitForReply(page, 'hello');
    await sendMessage(page, '/write notes.txt: new line');

    await page.locator('#items .turn-files button', { hasText: '1 file changed' }).click();
    const diff = page.locator('dialog.files-dialog');
    await diff.locator('.diff-del', { hasText: '-old line' }).waitFor();
    await diff.locator('.diff-add', { hasText: '+new line' }).waitFor();
    // The file now ends without a newline: a small mark on its last line, not the unified diff's
    // raw "\ No newline at end of file" line.
    assert.equal(await diff.locator('.diff-add', { hasText: '+new line' }).locator('.no-eol').textContent(), 'no newline at end of file');
    assert.doesNotMatch(await diff.textContent(), /\\ No newline/);
    await diff.locator('button', { hasText: 'Close' }).click();
    await diff.waitFor({ state: 'detached' });

    await page.locator('#items .item.user-message', { hasText: '/write notes.txt' }).locator('button', { hasText: 'Restart from here' }).click();
    const ask = page.locator('dialog.files-dialog', { hasText: 'Also restore files (1 file changed since)' });
    await ask.waitFor();
    assert.ok(await ask.locator('.restore-choice input').isChecked());
    assert.equal(await ask.locator('.restore-conflicts').count(), 0, 'nobody else changed the file');
    // It names the files it would restore (the service's dry run answers which).
    assert.equal(await ask.locator('.restore-list p').textContent(), 'This file goes back to how it was just before this message:');
    assert.deepEqual(await ask.locator('.restore-list li').allTextContents(), ['notes.txt']);
    assert.equal(await ask.locator('.restore-choice input').getAttribute('aria-describedby'), 'restore-list');
    await checkAxe(page, 'the restore dialog');
    assert.equal(fs.readFileSync(notes, 'utf8'), 'new line', 'asking changes nothing');
    await ask.locator('button.primary').click();
    await page.locator('#banners .banner.notice', { hasText: 'Restored 1 file: notes.txt.' }).waitFor();
    assert.equal(fs.readFileSync(notes, 'utf8'), 'old line\n');

    await page.locator('#banners .banner-action', { hasText: 'Undo restore' }).click();
    await page.locator('#banners .banner.notice', { hasText: 'The files are back as they were before the restore: notes.txt.' }).waitFor();
    assert.equal(fs.readFileSync(notes, 'utf8'), 'new line');
  }));
