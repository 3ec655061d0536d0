// The keyboard. The landing page has the message box ready; Esc interrupts a running turn; ↑ in
// an empty box edits the last waiting message and Enter saves the edit; Ctrl+Shift+O starts a new
// conversation; the sidebar's rows are reached with the arrow keys and their actions with
// Shift+F10.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, apiGet, conversationId, waitForReply, waitIdle, waitRunning, withUi } = require('./harness');

const focused = (page) => page.evaluate(() => document.activeElement && (document.activeElement.id || document.activeElement.className));

test('the landing page has the message box ready: typing and Enter start a conversation', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await page.locator('#message').waitFor();
    assert.equal(await focused(page), 'message');
    assert.equal(await page.textContent('#send'), 'Start');
    await page.keyboard.type('No clicks needed');
    await page.keyboard.press('Enter');
    await page.waitForURL(/#\/c\/[^/]+$/);
    await waitForReply(page, 'No clicks needed');
  }));

test('Ctrl+Shift+O starts a new conversation from anywhere', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await page.keyboard.type('the first one');
    await page.keyboard.press('Enter');
    await waitForReply(page, 'the first one');
    await page.locator('#items').click();
    // Keys typed right after the shortcut belong to the new conversation, none to the old one.
    await page.keyboard.press('Control+Shift+O');
    await page.keyboard.type('typed at once');
    await page.locator('#conversation-title', { hasText: 'New conversation' }).waitFor();
    assert.equal(await page.inputValue('#message'), 'typed at once');
    assert.equal(await focused(page), 'message');
    assert.equal(await page.textContent('#send'), 'Start');
    assert.equal(await page.getAttribute('#new-conversation', 'aria-keyshortcuts'), 'Control+Shift+O Meta+Shift+O');
  }));

test('Esc interrupts the running turn', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    // The answer has begun and the rest is held: the turn runs until Esc stops it.
    const gate = fake.hold({ text: ' never sent: the turn is interrupted first' });
    await page.fill('#message', 'talk slowly');
    await page.keyboard.press('Enter');
    await gate.write('Talking slowly');
    await page.locator('#items .item.agent-message.status-running', { hasText: 'Talking slowly' }).waitFor();
    await page.locator('#items').click();
    await page.keyboard.press('Escape');
    await page.locator('#items .turn-end.interrupted').waitFor();
    await waitIdle(page);
    await page.locator('#items .item.agent-message.status-interrupted').waitFor();
  }));

test('↑ in the empty message box edits the last waiting message, and Enter saves the edit', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake, server }) => {
    const gate = fake.hold({ text: 'Done.' });
    await page.keyboard.type('work on it');
    await page.keyboard.press('Enter');
    await page.waitForURL(/#\/c\/[^/]+$/);
    const id = conversationId(page);
    await waitRunning(page);
    await page.keyboard.type('one');
    await page.keyboard.press('Enter');
    await page.keyboard.type('two');
    await page.keyboard.press('Enter');
    await page.locator('#pending-list li.pending-item', { hasText: 'two' }).waitFor();

    assert.equal(await page.inputValue('#message'), '');
    await page.keyboard.press('ArrowUp');
    const area = page.locator('#pending-list li.pending-item.editing textarea');
    await area.waitFor();
    assert.equal(await area.inputValue(), 'two');
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'Edit the waiting message');
    await page.keyboard.press('End');
    await page.keyboard.type(', edited');
    await page.keyboard.press('Enter');
    await page.locator('#pending-list li.pending-item:not(.editing)', { hasText: 'two, edited' }).waitFor();
    const pending = (await apiGet(server(), `/api/conversations/${id}/pending`)).pending.map((m) => m.text);
    assert.deepEqual(pending, ['one', 'two, edited']);
    gate.release();
  }));

test('the sidebar: arrow keys move between rows, Shift+F10 opens the row actions, Esc closes them', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    for (const text of ['alpha', 'beta']) {
      if (text !== 'alpha') await page.keyboard.press('Control+Shift+O');
      await page.keyboard.type(text);
      await page.keyboard.press('Enter');
      await waitForReply(page, text);
    }
    const links = page.locator('#conversation-list a.conv-link');
    await links.nth(1).waitFor();
    await links.first().focus();
    assert.equal(await page.evaluate(() => document.activeElement.textContent.startsWith('beta')), true);
    await page.keyboard.press('ArrowDown');
    assert.equal(await page.evaluate(() => document.activeElement.textContent.startsWith('alpha')), true);

    await page.keyboard.press('Shift+F10');
    const menu = page.locator('.menu[role="menu"]');
    await menu.waitFor();
    assert.deepEqual(await menu.locator('[role="menuitem"]').allTextContents(), ['Rename', 'Archive', 'Delete…']);
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Rename');
    await page.keyboard.press('ArrowDown');
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Archive');
    await page.keyboard.press('Escape');
    await menu.waitFor({ state: 'detached' });
    assert.equal(await page.evaluate(() => document.activeElement.textContent.startsWith('alpha')), true);

    // F2 renames in place.
    await page.keyboard.press('F2');
    const input = page.locator('#conversation-list input.rename');
    await input.waitFor();
    await input.fill('alpha, renamed');
    await input.press('Enter');
    await page.locator('#conversation-list .conv-title', { hasText: 'alpha, renamed' }).waitFor();
  }));
