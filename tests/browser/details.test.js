// The smaller points of the UI. Deleting a working conversation is refused before the "cannot be
// undone" question; the sidebar's row actions never move the rows; shown times follow the order
// of the timeline; "Jump to latest" stays while the reader is scrolled up and says "New output
// below" when more came; errors are written for people (the API code in small type); the Agents
// tab says plainly when there are no sub-agents; the context meter reads as figures with its
// threshold labelled, and moves with a streaming reply.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { TEST_TIMEOUT, apiGet, startConversation, waitForReply, waitIdle, withUi } = require('./harness');

test('deleting a working conversation is refused before asking whether to delete it', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    const dialogs = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      dialog.dismiss();
    });
    // The answer is held: the conversation works until the test interrupts it.
    const gate = fake.hold({ text: 'never sent: the turn is interrupted first' });
    await startConversation(page, 'stay busy');
    await gate.requested;
    const row = page.locator('#conversation-list li.conv.running');
    await row.waitFor();
    await row.hover();
    await row.locator('button.conv-menu').click();
    await page.locator('.menu [role="menuitem"]', { hasText: 'Delete' }).click();
    const banner = page.locator('#banners .banner.error', { hasText: 'is still working, so it cannot be deleted' });
    await banner.waitFor();
    assert.deepEqual(dialogs, [], 'no "cannot be undone" question for a conversation that cannot be deleted');

    // Its action interrupts; then deleting asks first, and deletes.
    await banner.locator('button', { hasText: 'Interrupt it' }).click();
    await page.locator('#conversation-list li.conv:not(.running)').waitFor();
    await page.locator('#conversation-list li.conv button.conv-menu').click();
    page.removeAllListeners('dialog');
    page.once('dialog', (dialog) => {
      dialogs.push(dialog.message());
      dialog.accept();
    });
    await page.locator('.menu [role="menuitem"]', { hasText: 'Delete' }).click();
    await page.locator('#conversation-list li.conv').waitFor({ state: 'detached' });
    assert.match(dialogs[0], /This cannot be undone\./);
  }));

test('showing a row’s actions does not move the rows below it', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    for (const text of ['one', 'two', 'three']) {
      await startConversation(page, text);
      await waitForReply(page, text);
    }
    const rows = page.locator('#conversation-list li.conv');
    await rows.nth(2).waitFor();
    const boxes = async () => Promise.all([0, 1, 2].map((i) => rows.nth(i).boundingBox()));
    await page.mouse.move(1000, 800);
    const before = await boxes();
    await rows.nth(1).hover();
    await rows.nth(1).locator('button.conv-menu').waitFor({ state: 'visible' });
    assert.equal(await rows.nth(1).locator('button.conv-menu').evaluate((b) => getComputedStyle(b).opacity), '1');
    assert.deepEqual(await boxes(), before);
    await rows.nth(1).locator('button.conv-menu').click();
    await page.locator('.menu').waitFor();
    assert.deepEqual(await boxes(), before);
  }));

test('shown times follow the order of the timeline', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake, server }) => {
    // A turn of two steps: a command that waits for the test, then an answer. A message queued
    // during the command is written before the answer but joins the timeline after it.
    // The model takes a moment over step two, as real ones do.
    fake.push(
      { tool: 'shell', args: { command: 'while [ ! -e go ]; do sleep 0.05; done; echo went' } },
      () => ({ waitFor: new Promise((resolve) => setTimeout(resolve, 1500)), then: { text: 'Step two is done.' } }),
    );
    await startConversation(page, 'two steps');
    await page.locator('#items .item.tool-call .tool-state.state-running').waitFor();
    await page.selectOption('#mode', 'queue');
    await page.fill('#message', 'the question I queued');
    await page.press('#message', 'Enter');
    await page.locator('#pending-list li.pending-item', { hasText: 'the question I queued' }).waitFor();
    // The answer is written after the queued message (times are compared to the millisecond).
    fs.writeFileSync(path.join(server().cwd, 'go'), '');
    await page.locator('#items .item.agent-message', { hasText: 'Echo: the question I queued' }).waitFor();
    await waitIdle(page);

    const times = await page.locator('#items time').evaluateAll((nodes) => nodes.map((node) => node.getAttribute('datetime')));
    const sorted = [...times].sort();
    assert.deepEqual(times, sorted, 'times never go backwards down the page');
    // The queued message shows when it joined; when it was written is in its tooltip.
    const queued = page.locator('#items .item.user-message', { hasText: 'the question I queued' }).locator('time');
    assert.match(await queued.getAttribute('title'), /^Sent .*; it joined the conversation when the agent took it/);
  }));

test('"Jump to latest" stays while the reader is scrolled up, and says "New output below" once more came', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    const paragraphs = (from, to) =>
      Array.from({ length: to - from + 1 }, (_, n) => `Paragraph ${from + n} of a long answer that keeps coming.`).join('\n\n') + '\n\n';
    // The answer arrives in pieces the test writes: more comes after the reader scrolled up.
    const gate = fake.hold({ text: '\n\nThe end.' });
    await startConversation(page, 'a long answer please');
    await gate.write(paragraphs(1, 40));
    const timeline = page.locator('#timeline');
    await page.waitForFunction(() => {
      const t = document.getElementById('timeline');
      return t.scrollHeight > t.clientHeight + 200;
    });
    const button = page.locator('#new-output');
    assert.equal(await button.isVisible(), false, 'following the end: no button');
    // The reader scrolls up with the mouse wheel: the way back is offered at once.
    // (The pointer over the timeline's middle: over the button, the wheel would not scroll it.)
    const box = await timeline.boundingBox();
    const wheelToTop = async () => {
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      await page.mouse.wheel(0, -100_000);
      await page.waitForFunction(() => document.getElementById('timeline').scrollTop === 0);
    };
    await wheelToTop();
    await button.waitFor({ state: 'visible' });
    assert.equal(await button.textContent(), 'Jump to latest ↓');
    // More output arrives: the button says so, and reading stays where the reader is.
    const height = await timeline.evaluate((t) => t.scrollHeight);
    await gate.write(paragraphs(41, 80));
    await page.locator('#new-output', { hasText: 'New output below ↓' }).waitFor();
    await page.waitForFunction((h) => document.getElementById('timeline').scrollHeight > h, height);
    assert.equal(await timeline.evaluate((t) => t.scrollTop), 0);
    await button.click();
    await button.waitFor({ state: 'hidden' });
    const atEnd = () =>
      page.waitForFunction(() => {
        const t = document.getElementById('timeline');
        return t.scrollHeight - t.scrollTop - t.clientHeight < 40;
      });
    await atEnd();
    // The turn ends; the reader scrolls up at once, while the page may still be laying out the
    // end of the long answer it received: that is not new output.
    gate.release();
    await page.locator('#items .item.agent-message.status-completed').waitFor();
    await waitIdle(page);
    await wheelToTop();
    await button.waitFor({ state: 'visible' });
    await page.locator('#items .item.agent-message .md', { hasText: 'The end.' }).waitFor();
    // Two frames more: whatever the page laid out last has been seen by the scroll code.
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    assert.equal(await button.textContent(), 'Jump to latest ↓');
    assert.equal(await timeline.evaluate((t) => t.scrollTop), 0);
    // Scrolling back down to the end puts the button away; up again brings it back; it jumps.
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, 100_000);
    await button.waitFor({ state: 'hidden' });
    await wheelToTop();
    await page.locator('#new-output', { hasText: 'Jump to latest ↓' }).waitFor();
    await button.click();
    await button.waitFor({ state: 'hidden' });
    await atEnd();
  }));

test('errors are written for people, with the API code in small type', { timeout: TEST_TIMEOUT }, () =>
  withUi({ allowConsole: [/status of 422/] }, async ({ page }) => {
    // A new conversation in a directory that does not exist.
    await page.locator('#main[data-view="new"] #composer').waitFor();
    await page.fill('#cwd', '/no/such/directory');
    await page.fill('#message', 'hello');
    await page.press('#message', 'Enter');
    const banner = page.locator('#banners .banner.error');
    await banner.waitFor();
    assert.equal(await banner.locator('.banner-text').textContent(), 'The working directory of this conversation is missing.');
    assert.equal(await banner.locator('.banner-detail code').textContent(), 'cwd_missing');
    const sizes = await banner.evaluate((node) => [
      parseFloat(getComputedStyle(node.querySelector('.banner-text')).fontSize),
      parseFloat(getComputedStyle(node.querySelector('.banner-detail')).fontSize),
    ]);
    assert.ok(sizes[1] < sizes[0], `the code is smaller: ${sizes}`);
    // The message is back in the box.
    assert.equal(await page.inputValue('#message'), 'hello');
    await banner.locator('button.banner-close').click();
    await banner.waitFor({ state: 'detached' });
  }));

test('the Agents tab says plainly when there are no sub-agents', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await startConversation(page, 'alone');
    await waitForReply(page, 'alone');
    await page.click('#tab-agents');
    const empty = page.locator('#agents-empty');
    await empty.waitFor();
    assert.match(await empty.textContent(), /^This conversation has no sub-agents\./);
    assert.equal(await page.locator('#agent-list li.agent-row').count(), 1);
    assert.match(await page.locator('#agent-list li.agent-row').textContent(), /default \(main agent\)idle/);
  }));

test('the context meter shows used / window in figures, explains reported and estimated, and labels the threshold', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await startConversation(page, 'measure me');
    await waitForReply(page, 'measure me');
    const meter = page.locator('#usage');
    await meter.waitFor();
    assert.match(await page.textContent('#usage-figures'), /^\d+(\.\d)?k? \/ 33k tokens$/);
    const source = await page.textContent('#usage-source');
    assert.ok(['reported', 'estimated'].includes(source), source);
    assert.match(await page.getAttribute('#usage-source', 'title'), source === 'reported' ? /^Reported: the model provider counted/ : /^Estimated: the service counted this itself/);
    assert.match(await meter.getAttribute('title'), /^Context in use: [\d,]+ of 32,768 tokens .* At 26,214 tokens \(the compaction threshold\) older history is summarized\.$/);
    assert.equal(await page.textContent('#usage-threshold-label'), 'compacts at 26k');
    assert.match(await page.getAttribute('#usage-bar', 'aria-valuetext'), /^[\d,]+ of 32,768 tokens \(\d+%\), (reported|estimated)$/);
  }));

test('the context meter moves while a reply streams; the service’s next figures replace the estimate', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake, server }) => {
    const gate = fake.hold({ text: 'Done.' });
    const id = await startConversation(page, 'a long reply please');
    await gate.requested;
    await page.locator('#usage').waitFor();
    const used = () => page.locator('#usage-bar').getAttribute('aria-valuenow').then(Number);
    const before = await used();
    // 10,000 characters stream in: about 2,500 tokens at 4 characters a token.
    await gate.write('word '.repeat(2000));
    await page.waitForFunction((from) => Number(document.getElementById('usage-bar').getAttribute('aria-valuenow')) >= from + 2400, before);
    assert.equal(await page.textContent('#usage-source'), 'estimated');
    assert.match(await page.getAttribute('#usage', 'title'), /Plus about [\d,]+ for the reply streaming now \(4 characters a token\), until the service counts it\. At /);
    assert.match(await page.getAttribute('#usage-bar', 'aria-valuetext'), /, estimated$/);
    gate.release();
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Done.' }).waitFor();
    await waitIdle(page);
    await page.waitForFunction(() => !document.getElementById('usage').title.includes('streaming now'));
    // What the meter shows is the service's figure again.
    const usage = await apiGet(server(), `/api/conversations/${encodeURIComponent(id)}/usage`);
    assert.equal(await used(), usage.used_tokens);
    assert.equal(await page.textContent('#usage-source'), usage.source);
  }));
