// "Fork into a worktree": the fork menu (the "▾" beside Fork, and the phone's "⋯" menu) forks a
// conversation into a copy of its working tree; in a git repository with a commit that copy is
// a linked worktree with the uncommitted changes. The copy opens, says where its files are, and
// both the list's row and the header mark it with its directory. While a turn runs in the
// directory no copy is made: the error says so, nothing typed is lost, and a fork without a
// copy is offered.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { PHONE, TEST_TIMEOUT, apiGet, checkAxe, conversationId, inEachView, screenshot, startConversation, waitForReply, waitIdle, withUi } = require('./harness');

// A git repository with one commit in `dir`, and an uncommitted change on top of it.
function gitRepository(dir) {
  const git = (...args) => execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', ...args], { cwd: dir, stdio: 'pipe' });
  git('init', '-q');
  fs.writeFileSync(path.join(dir, 'README.md'), 'committed\n');
  git('add', 'README.md');
  git('commit', '-q', '-m', 'first');
  fs.writeFileSync(path.join(dir, 'README.md'), 'committed\nand changed since\n');
}

// What the eye reads of a node: its text without what only a screen reader hears.
function seen(locator) {
  return locator.evaluate((node) => {
    const copy = node.cloneNode(true);
    copy.querySelectorAll('.visually-hidden').forEach((hidden) => hidden.remove());
    return copy.textContent;
  });
}

async function waitForOther(page, id) {
  await page.waitForURL((url) => /^#\/c\/[^/]+$/.test(url.hash) && !url.hash.endsWith(encodeURIComponent(id)));
  return conversationId(page);
}

async function menuItems(page) {
  const menu = page.getByRole('menu');
  await menu.waitFor();
  return menu.getByRole('menuitem').evaluateAll((items) => items.map((item) => item.querySelector('.menu-label')?.textContent ?? item.textContent));
}

test('Fork into a worktree opens the copy, marked with its directory in the list and the header', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, server, root }) => {
    gitRepository(server().cwd);
    const source = await startConversation(page, 'plan the release');
    await waitForReply(page, 'plan the release');

    // The fork menu: both ways to fork, each saying what it does.
    const opener = page.locator('#fork-menu');
    assert.equal(await opener.getAttribute('aria-haspopup'), 'menu');
    assert.equal(await opener.getAttribute('aria-label'), 'More ways to fork');
    await opener.click();
    assert.deepEqual(await menuItems(page), ['Fork', 'Fork into a worktree']);
    assert.equal(await opener.getAttribute('aria-expanded'), 'true');
    const item = page.getByRole('menuitem', { name: 'Fork into a worktree' });
    assert.match(await item.locator('.menu-hint').textContent(), /its own copy of the files/);
    await checkAxe(page, 'the fork menu');
    await screenshot(page, 'fork-menu');
    await item.click();

    const fork = await waitForOther(page, source);
    await page.locator('#conversation-title', { hasText: 'plan the release (fork)' }).waitFor();
    const conversation = await apiGet(server(), `/api/conversations/${encodeURIComponent(fork)}`);
    assert.equal(conversation.forked_from.worktree, 'git');
    const cwd = conversation.cwd;
    assert.ok(cwd.startsWith(path.join(root, 'data', 'worktrees')), `the copy is under the data directory: ${cwd}`);
    // A linked worktree, with the change that was not committed.
    assert.ok(fs.statSync(path.join(cwd, '.git')).isFile(), 'a linked git worktree');
    assert.equal(fs.readFileSync(path.join(cwd, 'README.md'), 'utf8'), 'committed\nand changed since\n');

    // The header: the mark and the directory, shortened, whole in its title and for a screen reader.
    const headerMark = page.locator('#conversation-meta .worktree-mark');
    await headerMark.waitFor();
    assert.equal(await headerMark.getAttribute('data-kind'), 'git');
    assert.equal(await seen(headerMark.locator('.badge.worktree')), 'worktree');
    assert.ok((await headerMark.getAttribute('title')).endsWith(cwd), 'the whole directory in the title');
    const shown = await seen(headerMark.locator('.worktree-dir'));
    assert.ok(shown.length <= 60 && shown.endsWith('/work'), `a short directory: ${shown}`);
    assert.match(await headerMark.textContent(), new RegExp(`forked into a worktree, in .*${cwd.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    assert.equal(await page.locator('#conversation-meta .cwd').count(), 0, 'the directory is shown once');
    // The notice: where its files are, and that the original and its files are unchanged.
    const notice = page.locator('#banners .banner.notice');
    assert.match(await notice.textContent(), /This is a copy of “plan the release” up to its last finished turn, working in a git worktree of its repository, with its uncommitted changes: .*\. The original and its files are unchanged\./);
    assert.equal(await notice.locator('code').textContent(), cwd);

    // The list: the fork's row is marked with its directory; the source's is not.
    const row = page.locator(`#conversation-list li[data-id="${fork}"]`);
    const rowMark = row.locator('.worktree-mark');
    await rowMark.waitFor();
    assert.equal(await seen(rowMark.locator('.badge.worktree')), 'worktree');
    const rowDir = await seen(rowMark.locator('.worktree-dir'));
    assert.ok(rowDir.length <= 22 && rowDir.endsWith('/work'), `a short directory in the row: ${rowDir}`);
    assert.ok((await rowMark.getAttribute('title')).endsWith(cwd));
    assert.match(await row.locator('a.conv-link').textContent(), /worktree/);
    assert.equal(await page.locator(`#conversation-list li[data-id="${source}"] .worktree-mark`).count(), 0);

    // The copy works: a turn runs there.
    await page.fill('#message', 'in the copy');
    await page.press('#message', 'Enter');
    await waitForReply(page, 'in the copy');

    await inEachView(page, async (size, scheme) => {
      if (size === 'phone') {
        await page.click('#sidebar-open');
        await page.locator('body.sidebar-open').waitFor();
      }
      await screenshot(page, `worktree-fork-${size}-${scheme}`);
      await checkAxe(page, `a worktree fork, ${size} ${scheme}`);
      if (size === 'phone') {
        await page.keyboard.press('Escape');
        await page.locator('body:not(.sidebar-open)').waitFor();
      }
    });

    // On a phone the "⋯" menu has both ways to fork, and shows the mark with the details.
    await page.setViewportSize(PHONE);
    await page.click('#header-menu');
    const items = await menuItems(page);
    assert.deepEqual(items.slice(0, 2), ['Fork', 'Fork into a worktree']);
    await page.getByRole('menuitem', { name: 'Show details' }).click();
    assert.ok(await page.locator('#conversation-meta .worktree-mark').isVisible());
    await screenshot(page, 'worktree-fork-phone-details');
  }));

test('while a turn runs there, Fork into a worktree says why it made nothing, keeps the draft, and offers a plain fork', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true, allowConsole: [/status of 409 \(Conflict\)/] }, async ({ page, fake, server }) => {
    const source = await startConversation(page, 'first turn');
    await page.locator('#items .item.agent-message', { hasText: 'Echo: first turn' }).waitFor();
    await waitIdle(page);
    const gate = fake.hold({ text: 'second turn done' });
    await page.fill('#message', 'second turn');
    await page.press('#message', 'Enter');
    await gate.requested;
    await page.fill('#message', 'a draft that must stay');

    await page.click('#fork-menu');
    await page.getByRole('menuitem', { name: 'Fork into a worktree' }).click();
    const banner = page.locator('#banners .banner.error');
    await banner.waitFor();
    assert.match(await banner.locator('.banner-text').textContent(), /A turn is running in this working directory.*no copy was made/);
    assert.equal(await banner.locator('.banner-detail code').textContent(), 'turn_running');
    assert.equal(await banner.getAttribute('role'), 'alert');
    // Nothing is lost: the same conversation, the draft, and no copy made.
    assert.equal(conversationId(page), source);
    assert.equal(await page.inputValue('#message'), 'a draft that must stay');
    assert.equal((await apiGet(server(), '/api/conversations')).conversations.length, 1);
    assert.equal(await page.locator('#banners .banner.notice').count(), 0, 'the "copying" notice is gone');
    await checkAxe(page, 'a refused worktree fork');

    // The plain fork it offers works meanwhile (up to the last finished turn).
    await banner.getByRole('button', { name: 'Fork without a copy' }).click();
    const fork = await waitForOther(page, source);
    await page.locator('#conversation-title', { hasText: 'first turn (fork)' }).waitFor();
    await page.locator('#conversation-meta .cwd').waitFor();
    assert.equal(await page.locator('#conversation-meta .worktree-mark').count(), 0);
    const copy = await apiGet(server(), `/api/conversations/${encodeURIComponent(fork)}`);
    assert.equal(copy.cwd, server().cwd);
    assert.equal(copy.forked_from.worktree, undefined);
    gate.release();
  }));
