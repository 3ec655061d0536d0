// The keyboard. The landing page has the message box ready; Esc interrupts a running turn; ↑ in
// an empty box edits the last waiting message and Enter saves the edit; Ctrl+Shift+O starts a new
// conversation; the sidebar's rows are reached with the arrow keys and their actions with
// Shift+F10. After Retry the focus is in the message box; the history is a Tab stop scrolled with
// Page Up, Page Down, Home and End; ? lists the shortcuts.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, apiGet, checkAxe, conversationId, waitForReply, waitIdle, waitRunning, withUi } = require('./harness');

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

test('after Retry the focus is in the message box, not lost to the page', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    fake.push({ status: 400, message: 'the model refuses this request' }, { text: 'Second time lucky.' });
    await page.keyboard.type('please do the thing');
    await page.keyboard.press('Enter');
    const retry = page.locator('#items .turn-end.failed button', { hasText: 'Retry' });
    await retry.waitFor();
    await retry.focus();
    await page.keyboard.press('Enter');
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Second time lucky.' }).waitFor();
    await waitIdle(page);
    await retry.waitFor({ state: 'detached' });
    await page.waitForFunction(() => document.activeElement && document.activeElement.id === 'message');
    assert.equal(await focused(page), 'message');
  }));

test('the history is a Tab stop, scrolled with Page Up, Page Down, Home and End', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    const lines = Array.from({ length: 150 }, (_, i) => `Line ${i + 1} of a long answer.\n`).join('\n');
    await page.keyboard.type('short first');
    await page.keyboard.press('Enter');
    await waitForReply(page, 'short first');
    await page.fill('#message', `/echo\n${lines}`);
    await page.press('#message', 'Enter');
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Line 150 of a long answer.' }).waitFor();
    await waitIdle(page);
    const timeline = page.locator('#timeline');
    assert.equal(await timeline.getAttribute('tabindex'), '0');
    assert.equal(await timeline.getAttribute('aria-label'), 'Conversation history');
    // Reached with Tab from what comes before it (the tabs above it).
    await page.focus('#tab-conversation');
    await page.keyboard.press('Tab');
    assert.equal(await focused(page), 'timeline');
    const top = () => timeline.evaluate((node) => node.scrollTop);
    const max = await timeline.evaluate((node) => node.scrollHeight - node.clientHeight);
    assert.ok(max > 1000, `the history scrolls (${max} px)`);
    await page.waitForFunction(() => {
      const node = document.getElementById('timeline');
      return node.scrollHeight - node.clientHeight - node.scrollTop < 2;
    });
    // A key's scroll, until it has ended ('scrollend': a smooth scroll still moving takes the
    // next key as part of it).
    const press = async (key) => {
      await timeline.evaluate((node) => {
        window.__scrollEnded = false;
        node.addEventListener('scrollend', () => (window.__scrollEnded = true), { once: true });
      });
      await page.keyboard.press(key);
      await page.waitForFunction(() => window.__scrollEnded);
      return top();
    };
    assert.equal(await press('Home'), 0);
    const afterPageDown = await press('PageDown');
    assert.ok(afterPageDown > 100, `Page Down scrolls down (${afterPageDown} px)`);
    const afterTwo = await press('PageDown');
    assert.ok(afterTwo > afterPageDown + 100, `and again (${afterTwo} px)`);
    const afterPageUp = await press('PageUp');
    assert.ok(afterPageUp < afterTwo - 100, `Page Up scrolls up (${afterPageUp} px)`);
    assert.ok(max - (await press('End')) < 2, 'End goes to the end');
    assert.equal(await focused(page), 'timeline');
  }));

test('? lists every keyboard shortcut in a dialog, and Esc closes it', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await page.keyboard.type('what is 6 × 7?');
    await page.keyboard.press('Enter');
    await waitForReply(page, 'what is 6 × 7?');
    // In the message box `?` is a character like any other.
    await page.keyboard.type('?');
    assert.equal(await page.inputValue('#message'), '?');
    assert.equal(await page.locator('dialog[open]').count(), 0);
    await page.fill('#message', '');

    await page.focus('#timeline');
    await page.keyboard.press('?');
    const dialog = page.getByRole('dialog', { name: 'Keyboard shortcuts' });
    await dialog.waitFor();
    const keys = await dialog.locator('dt').allTextContents();
    for (const key of ['?', 'Esc', 'Ctrl+Shift+O ⌘⇧O', 'Enter', 'Shift+Enter', '/', '↑', 'Alt+A', 'Alt+D', 'Page Up Page Down', 'Home End', 'Shift+F10', 'F2']) {
      assert.ok(keys.includes(key), `${key} is listed: ${JSON.stringify(keys)}`);
    }
    assert.equal(await focused(page), '');
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Close');
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      await checkAxe(page, `the shortcuts dialog, ${scheme}`);
    }
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    // The focus is back where it was.
    assert.equal(await focused(page), 'timeline');
  }));
