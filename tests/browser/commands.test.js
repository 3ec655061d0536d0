// The repository's commands in the message box: `/` lists those of the working directory to
// complete, `/name arguments` is sent as the command (the model gets its expanded prompt), and
// the history shows the prompt under the command's name.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { TEST_TIMEOUT, checkAxe, screenshot, waitIdle, withUi } = require('./harness');

function writeCommand(root, name, text) {
  const dir = path.join(root, 'work', '.agents', 'commands');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${name}.md`), text);
}

test('typing / lists the directory\'s commands, and one is sent by name', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: {} }, async ({ page, fake, root }) => {
    writeCommand(root, 'review', '---\ndescription: Review a file with care\nargument-hint: <path>\n---\nReview $1 and report what breaks.\n');
    writeCommand(root, 'release-notes', '---\ndescription: Draft the release notes\n---\nWrite the release notes.\n');
    await page.locator('#main[data-view="new"] #composer').waitFor();
    const box = page.locator('#message');
    await box.focus();
    await page.keyboard.type('/');
    const list = page.locator('#command-list');
    await list.locator('[role="option"]').first().waitFor();
    assert.deepEqual(await list.locator('.command-name').allTextContents(), ['/release-notes', '/review']);
    assert.equal(await list.locator('.command-hint').allTextContents().then((hints) => hints.join('')), ' <path>');
    assert.equal(await box.getAttribute('aria-controls'), 'command-list');
    await page.keyboard.press('ArrowDown');
    assert.equal(await box.getAttribute('aria-activedescendant'), 'command-option-1');
    assert.equal(await list.locator('[aria-selected="true"] .command-name').textContent(), '/review');
    await screenshot(page, 'commands-list');
    await checkAxe(page, 'the command list open');

    // Typing narrows the list; Enter completes the name, then sends with the arguments.
    await page.keyboard.type('r');
    assert.deepEqual(await list.locator('.command-name').allTextContents(), ['/release-notes', '/review']);
    await page.keyboard.type('ev');
    await page.waitForFunction(() => document.querySelectorAll('#command-list [role="option"]').length === 1);
    await page.keyboard.press('Enter');
    assert.equal(await box.inputValue(), '/review ');
    assert.equal(await list.isHidden(), true);
    await page.keyboard.type('src/parser.rs');
    await page.keyboard.press('Enter');
    await page.waitForURL(/#\/c\/[^/]+$/);
    await waitIdle(page);

    const sent = fake.requests[0].body;
    const user = sent.messages.filter((message) => message.role === 'user').pop();
    const prompt = typeof user.content === 'string' ? user.content : user.content[0].text;
    assert.equal(prompt, 'Review src/parser.rs and report what breaks.');
    const item = page.locator('#items .item.user-message').first();
    await item.locator('.command-used').waitFor();
    assert.equal(await item.locator('.command-used').textContent(), '/review src/parser.rs');
    assert.equal(await item.locator('.text').textContent(), 'Review src/parser.rs and report what breaks.');

    // A `/word` no command has goes as typed.
    await box.fill('/nothing here');
    await page.keyboard.press('Enter');
    await page.locator('#items .item.user-message .text', { hasText: '/nothing here' }).waitFor();
    await waitIdle(page);
    await screenshot(page, 'commands-sent');
    await checkAxe(page, 'a command in the history');
  }),
);
