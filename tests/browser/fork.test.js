// Fork and "Restart from here" are clear. A fork's title names its source and never grows
// "(fork) (fork)"; the header links to the source by its title; after a fork or a rewind a notice
// says the original is unchanged and links back; a rewind puts the message into the message box
// of the new conversation, ready to edit and send.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, conversationId, messageTexts, sendMessage, startConversation, waitForReply, withUi } = require('./harness');

async function waitForOther(page, id) {
  await page.waitForURL((url) => /^#\/c\/[^/]+$/.test(url.hash) && !url.hash.endsWith(encodeURIComponent(id)));
  return conversationId(page);
}

test('a fork names its source, links back to it, and says the original is unchanged', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    const source = await startConversation(page, 'release plan');
    await waitForReply(page, 'release plan');

    await page.click('#fork');
    const fork = await waitForOther(page, source);
    await page.locator('#conversation-title', { hasText: 'release plan (fork)' }).waitFor();
    const link = page.locator('#conversation-meta a.forked-from');
    await link.filter({ hasText: 'forked from “release plan”' }).waitFor();
    assert.equal(await link.getAttribute('href'), `#/c/${encodeURIComponent(source)}`);
    const notice = page.locator('#banners .banner.notice');
    assert.match(await notice.textContent(), /This is a copy of “release plan” up to its last finished turn\. The original is unchanged\./);
    assert.equal(await notice.locator('a').getAttribute('href'), `#/c/${encodeURIComponent(source)}`);

    // A fork of the fork: the title does not grow; the header names its own source.
    await page.click('#fork');
    await waitForOther(page, fork);
    await page.locator('#conversation-meta a.forked-from', { hasText: 'forked from “release plan (fork)”' }).waitFor();
    assert.equal(await page.textContent('#conversation-title'), 'release plan (fork)');
    assert.ok(!(await page.textContent('#conversation-list')).includes('(fork) (fork)'));

    // The link leads back to the original, which is unchanged; the notice is not carried there.
    await page.click('#conversation-meta a.forked-from');
    await page.waitForURL((url) => url.hash.endsWith(encodeURIComponent(fork)));
    await page.locator('#conversation-meta a.forked-from', { hasText: 'forked from “release plan”' }).click();
    await page.waitForURL((url) => url.hash.endsWith(encodeURIComponent(source)));
    await page.locator('#conversation-title', { hasText: /^release plan$/ }).waitFor();
    await page.locator('#banners .banner.notice').waitFor({ state: 'detached' });
  }));

test('"Restart from here" opens a copy with the message in the box to edit, and links to the unchanged original', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    const source = await startConversation(page, 'first step');
    await waitForReply(page, 'first step');
    await sendMessage(page, 'second step, to redo');
    const before = await messageTexts(page);

    await page.locator('#items .item.user-message', { hasText: 'second step, to redo' }).locator('button', { hasText: 'Restart from here' }).click();
    await waitForOther(page, source);
    // The copy holds the history before that message; the message is in the box, focused.
    await page.locator('#items .item.agent-message', { hasText: 'you said "first step"' }).waitFor();
    assert.equal((await messageTexts(page)).length, 2);
    assert.equal(await page.inputValue('#message'), 'second step, to redo');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'message');
    const notice = page.locator('#banners .banner.notice');
    assert.match(await notice.textContent(), /restarts just before your message, which is back in the message box.*The original is unchanged\./);

    // Edit and send, as with an edit-and-resend.
    await page.fill('#message', 'second step, done better');
    await page.press('#message', 'Enter');
    await waitForReply(page, 'second step, done better');

    await notice.locator('a', { hasText: '“first step”' }).click();
    await page.waitForURL((url) => url.hash.endsWith(encodeURIComponent(source)));
    await page.locator('#items .item.agent-message', { hasText: 'you said "second step, to redo"' }).waitFor();
    assert.deepEqual(await messageTexts(page), before);
  }));

test('restarting from the first message gives a new conversation with the message in the box', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await startConversation(page, 'start over from here');
    await waitForReply(page, 'start over from here');
    await page.locator('#items .item.user-message button', { hasText: 'Restart from here' }).click();
    await page.waitForURL((url) => url.hash === '#/new');
    assert.equal(await page.inputValue('#message'), 'start over from here');
    assert.match(
      await page.locator('#banners .banner.notice').textContent(),
      /“start over from here” started with this message, so there was nothing to copy.*The original is unchanged\./,
    );
  }));
