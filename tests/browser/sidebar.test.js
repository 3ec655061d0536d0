// The conversation list as people find their way in it: a title is shown whole, on two lines
// when it needs them; a search marks its words and says when the messages matched; renaming a
// conversation leaves it where it was; a fork and a rewind say which conversation they came from.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, checkAxe, conversationId, inEachView, screenshot, sendMessage, startConversation, waitForReply, withUi } = require('./harness');

const LONG = 'Plan the migration of the billing tables'; // 40 characters: the longest automatic title

const titles = (page) => page.locator('#conversation-list .conv-title').allTextContents();

test('the list shows whole titles, keeps a renamed conversation in its place, and says where a fork or rewind came from', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    for (const text of ['alpha', LONG, 'gamma']) {
      await startConversation(page, text);
      await waitForReply(page, text);
    }
    const gamma = conversationId(page);
    await sendMessage(page, 'the second message');
    await page.waitForFunction(() => document.querySelectorAll('#conversation-list .conv-title').length === 3);
    assert.deepEqual(await titles(page), ['gamma', LONG, 'alpha']);

    // The whole title, on two lines.
    const long = page.locator('#conversation-list .conv-title', { hasText: LONG });
    const shape = await long.evaluate((node) => ({
      lines: Math.round(node.getBoundingClientRect().height / parseFloat(getComputedStyle(node).lineHeight)),
      cut: node.scrollHeight > node.clientHeight + 1 || node.scrollWidth > node.clientWidth + 1,
    }));
    assert.deepEqual(shape, { lines: 2, cut: false });

    // A search marks its words in the titles, and shows the matching text of a conversation
    // found by its messages rather than its title.
    await page.fill('#search', 'BILLING migration');
    await page.waitForFunction(() => document.querySelectorAll('#conversation-list li.conv').length === 1);
    assert.deepEqual(await page.locator('#conversation-list .conv-title mark').allTextContents(), ['migration', 'billing']);
    assert.equal(await page.locator('#conversation-list .conv-found').count(), 0);
    for (const scheme of ['dark', 'light']) {
      await page.emulateMedia({ colorScheme: scheme });
      await screenshot(page, `search-${scheme}`);
      await checkAxe(page, `search results, ${scheme}`);
    }
    await page.fill('#search', 'second message');
    await page.locator('#conversation-list li.conv .conv-title', { hasText: 'gamma' }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll('#conversation-list li.conv').length === 1);
    // Found by its messages: the text around the match, the words marked.
    const snippet = page.locator('#conversation-list li.conv .conv-snippet');
    assert.match(await snippet.textContent(), /second message/i);
    assert.deepEqual((await snippet.locator('mark').allTextContents()).map((t) => t.toLowerCase()), ['second', 'message']);
    assert.equal(await page.locator('#conversation-list .conv-title mark').count(), 0);
    await screenshot(page, 'search-snippet');
    await checkAxe(page, 'a search result found by its messages');
    await page.fill('#search', '');
    await page.waitForFunction(() => document.querySelectorAll('#conversation-list li.conv').length === 3);

    // Renaming the last one leaves it last, here and after a reload.
    await page.locator('#conversation-list li.conv', { hasText: 'alpha' }).locator('a.conv-link').focus();
    await page.keyboard.press('F2');
    await page.locator('#conversation-list input.rename').fill('alpha, renamed');
    await page.keyboard.press('Enter');
    await page.locator('#conversation-list .conv-title', { hasText: 'alpha, renamed' }).waitFor();
    assert.deepEqual(await titles(page), ['gamma', LONG, 'alpha, renamed']);
    await page.reload();
    await page.locator('#conversation-list .conv-title', { hasText: 'alpha, renamed' }).waitFor();
    assert.deepEqual(await titles(page), ['gamma', LONG, 'alpha, renamed']);

    // A fork of gamma, and a restart of gamma from its second message: each row says “from gamma”.
    await page.locator(`#conversation-list a.conv-link[href="#/c/${gamma}"]`).click();
    await page.locator('#items .item.agent-message', { hasText: 'the second message' }).waitFor();
    await page.click('#fork');
    await page.waitForURL((url) => !url.hash.endsWith(gamma));
    const fork = conversationId(page);
    const forkRow = page.locator(`#conversation-list li[data-id="${fork}"]`);
    await forkRow.locator('.conv-from', { hasText: 'from “gamma”' }).waitFor();
    assert.equal(await forkRow.locator('.fork-mark').getAttribute('aria-hidden'), 'true');

    await page.locator(`#conversation-list a.conv-link[href="#/c/${gamma}"]`).click();
    await page.locator('#items .item.user-message', { hasText: 'the second message' }).locator('button', { hasText: 'Restart from here' }).click();
    await page.waitForURL((url) => !url.hash.endsWith(gamma) && !url.hash.endsWith(fork));
    const rewound = conversationId(page);
    await page.locator(`#conversation-list li[data-id="${rewound}"] .conv-from`, { hasText: 'from “gamma”' }).waitFor();
    // The source itself is no copy.
    assert.equal(await page.locator(`#conversation-list li[data-id="${gamma}"] .conv-from`).count(), 0);
    // A copy's link is named with where it came from.
    assert.match(await page.locator(`#conversation-list li[data-id="${rewound}"] a.conv-link`).textContent(), /from “gamma”/);
    // The marks in every view (on a phone with the list open), checked by axe-core.
    await inEachView(page, async (size, scheme) => {
      if (size === 'phone') {
        await page.click('#sidebar-open');
        await page.locator('body.sidebar-open').waitFor();
      }
      await screenshot(page, `sidebar-forks-${size}-${scheme}`);
      await checkAxe(page, `the list with copies, ${size} ${scheme}`);
      if (size === 'phone') {
        await page.keyboard.press('Escape');
        await page.locator('body:not(.sidebar-open)').waitFor();
      }
    });
  }));
