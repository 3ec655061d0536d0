// Accessibility of the main views, checked by axe-core with no finding of any impact allowed:
// the empty state, a conversation with tool cards, a file diff, a task list and compacted
// history, the Agents tab and the open menus, at 1400×900 and 420×800, light and dark. The
// conversation list is one Tab stop, with the arrow keys inside it (a roving tabindex).
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { checkAxe, inEachView, screenshot, startConversation, waitIdle, withUi } = require('./harness');

const CHECKLIST = ['Both files are written:', '', '- [x] the release notes', '- [ ] the announcement', '', 'Next comes the announcement.'].join('\n');

// A conversation whose first turn is compacted, with a shell card, a write and a rewrite of a
// file (a diff) and a task list in the answer.
async function buildConversation(page, fake) {
  fake.push(
    { tool: 'write_file', args: { path: 'NOTES.md', content: '# Notes\n\n- first point\n- second point\n' } },
    { text: 'The notes are written.' },
  );
  const id = await startConversation(page, 'Write the release notes');
  await page.locator('#items .item.agent-message.status-completed', { hasText: 'The notes are written.' }).waitFor();
  await waitIdle(page);
  fake.push(
    { tool: 'shell', args: { command: 'echo checking && ls' } },
    { tool: 'write_file', args: { path: 'NOTES.md', content: '# Notes\n\n- first point, reworded\n- second point\n- third point\n' } },
    { text: CHECKLIST },
  );
  await page.fill('#message', 'Check the directory and add a third point');
  await page.press('#message', 'Enter');
  await page.locator('#items .item.agent-message.status-completed', { hasText: 'Next comes the announcement.' }).waitFor();
  await page.locator('#items .tool-write-file .diff-add').first().waitFor();
  await waitIdle(page);
  // The summary (the fake's echo) stands for the first turn; the page says what was done.
  await page.click('#compact');
  await page.locator('#banners .banner.notice', { hasText: 'Context compressed' }).waitFor();
  await page.locator('#items .item.summary').waitFor();
  await page.locator('#items .item.compacted.user-message').waitFor();
  return id;
}

test('axe-core finds nothing, of any impact, in the main views at both sizes, light and dark', { timeout: 240_000 }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      await page.locator('#main[data-view="new"]').waitFor();
      await checkAxe(page, `empty state, ${scheme}`);
    }
    await buildConversation(page, fake);
    assert.deepEqual(await page.locator('#items .md input[type="checkbox"]').evaluateAll((boxes) => boxes.map((b) => b.getAttribute('aria-label'))), ['done', 'not done']);
    await inEachView(page, async (size, scheme) => {
      const label = `${size} ${scheme}`;
      await page.locator('#items .item.summary summary').click();
      await page.locator('#items .item.summary[open]').waitFor();
      await page.locator('#items .item.compacted').first().scrollIntoViewIfNeeded();
      await screenshot(page, `a11y-${size}-${scheme}-compacted`);
      await checkAxe(page, `conversation, ${label}`);
      await page.locator('#items .item.summary summary').click();
      await page.locator('#items .item.summary:not([open])').waitFor();
      await page.locator('#items .tool-write-file .diff-add').last().scrollIntoViewIfNeeded();
      await screenshot(page, `a11y-${size}-${scheme}-diff`);

      await page.click('#tab-agents');
      await page.locator('#agents-empty').waitFor();
      await checkAxe(page, `Agents tab, ${label}`);
      await page.click('#tab-conversation');

      // The menus: a row's actions (the list open on a phone) and the header's on a phone.
      if (size === 'phone') {
        await page.click('#sidebar-open');
        await page.locator('body.sidebar-open').waitFor();
      }
      await page.locator('#conversation-list a.conv-link').first().focus();
      await page.keyboard.press('Shift+F10');
      await page.locator('.menu[role="menu"]').waitFor();
      await checkAxe(page, `a row's menu, ${label}`);
      await page.keyboard.press('Escape');
      await page.locator('.menu').waitFor({ state: 'detached' });
      if (size === 'phone') {
        await page.keyboard.press('Escape');
        await page.locator('body:not(.sidebar-open)').waitFor();
        await page.click('#header-menu');
        await page.locator('.menu[role="menu"]').waitFor();
        await screenshot(page, `a11y-${size}-${scheme}-menu`);
        await checkAxe(page, `the header's menu, ${label}`);
        await page.keyboard.press('Escape');
        await page.locator('.menu').waitFor({ state: 'detached' });
      }
    });
  }));

test('the conversation list is one Tab stop; the arrow keys, Home and End move inside it', { timeout: 120_000 }, () =>
  withUi(async ({ page }) => {
    for (const text of ['alpha', 'beta', 'gamma']) {
      if (text !== 'alpha') await page.keyboard.press('Control+Shift+O');
      await page.keyboard.type(text);
      await page.keyboard.press('Enter');
      await page.locator('#items .item.agent-message.status-completed', { hasText: `you said "${text}"` }).waitFor();
      await waitIdle(page);
    }
    const links = page.locator('#conversation-list a.conv-link');
    await links.nth(2).waitFor();
    // Only the open conversation's row is in the Tab order.
    const tabStops = () => links.evaluateAll((nodes) => nodes.filter((n) => n.tabIndex === 0).map((n) => n.textContent));
    const focusedTitle = () => page.evaluate(() => document.activeElement.querySelector('.conv-title')?.textContent);
    assert.deepEqual((await tabStops()).map((t) => t.slice(0, 5)), ['gamma']);

    // From the Archived filter, one Tab reaches the list, the next one leaves it.
    await page.locator('#show-archived').focus();
    await page.keyboard.press('Tab');
    assert.equal(await focusedTitle(), 'gamma');
    await page.keyboard.press('ArrowDown');
    assert.equal(await focusedTitle(), 'beta');
    await page.keyboard.press('End');
    assert.equal(await focusedTitle(), 'alpha');
    await page.keyboard.press('ArrowDown');
    assert.equal(await focusedTitle(), 'alpha');
    await page.keyboard.press('Home');
    assert.equal(await focusedTitle(), 'gamma');
    await page.keyboard.press('ArrowDown');
    // The row last moved to keeps the Tab stop, so Shift+Tab and Tab come back to it.
    assert.deepEqual((await tabStops()).map((t) => t.slice(0, 4)), ['beta']);
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => !!document.activeElement.closest('#conversation-list')), false);
    await page.keyboard.press('Shift+Tab');
    assert.equal(await focusedTitle(), 'beta');
    await page.keyboard.press('Enter');
    await page.locator('#conversation-title', { hasText: 'beta' }).waitFor();
  }));
