// Failures and retries. Each model.retry updates one line with a countdown; a failed turn shows
// as failed, in red, on the turn itself, with a Retry button that runs the turn again;
// the sidebar marks failed and interrupted conversations. The retry line offers Retry now and Stop.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, checkAxe, screenshot, startConversation, waitIdle, withUi } = require('./harness');

test('retries update one line with a countdown instead of stacking banners', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { retry: { initialDelayMs: 1500, maxDelayMs: 3000 } } }, async ({ page, fake }) => {
    await startConversation(page, 'hello');
    // The first turn's answer, before the failures are queued: they are for the second turn.
    await page.locator('#items .item.agent-message.status-completed').first().waitFor();
    await waitIdle(page);
    fake.push({ status: 500, message: 'upstream hiccup' }, { status: 500, message: 'upstream hiccup' }, { text: 'Through at last.' });
    // Everything the retry line showed, and how many retry lines there ever were at once.
    await page.evaluate(() => {
      window.__retry = { most: 0, texts: new Set() };
      new MutationObserver(() => {
        const lines = document.querySelectorAll('.line.retry');
        window.__retry.most = Math.max(window.__retry.most, lines.length + document.querySelectorAll('.banner').length);
        for (const line of lines) window.__retry.texts.add(line.textContent);
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    await page.fill('#message', 'try hard');
    await page.press('#message', 'Enter');
    const line = page.locator('#status-lines .line.retry');
    // Read from the observer's record rather than caught on screen: on a loaded machine a
    // line that shows for 1.5 s can come and go between two looks.
    const shown = (attempt) =>
      page.waitForFunction((text) => [...window.__retry.texts].find((seen) => seen.includes(text)), `Attempt ${attempt} of 10`, { timeout: 20000 })
        .then((handle) => handle.jsonValue());
    assert.match(await shown(2), /The model call failed \(.*upstream hiccup.*\)\. Attempt 2 of 10 (in \d s|now)/);
    await shown(3);
    await page.locator('#items .item.agent-message', { hasText: 'Through at last.' }).waitFor();
    await line.waitFor({ state: 'detached' });
    await waitIdle(page);

    const seen = await page.evaluate(() => ({ most: window.__retry.most, texts: [...window.__retry.texts] }));
    assert.equal(seen.most, 1, `one retry line at a time, no banners: ${JSON.stringify(seen)}`);
    // The countdown went down by the second (the second wait is 3 s).
    const countdowns = seen.texts.filter((text) => text.includes('Attempt 3 of 10')).map((text) => /in (\d) s/.exec(text)?.[1]);
    assert.ok(countdowns.includes('3') && countdowns.includes('2') && countdowns.includes('1'), JSON.stringify(seen.texts));
  }));

test('a failed turn shows as failed on the turn itself, and Retry runs it again', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    fake.push({ status: 400, message: 'the model refuses this request' }, { text: 'Second time lucky.' });
    await startConversation(page, 'please do the thing');

    const failed = page.locator('#items .turn-end.failed');
    await failed.waitFor();
    assert.match(await failed.textContent(), /^This turn failed\. .*the model refuses this request/);
    // Red, on the turn: right after its message, and the model's notice ("the previous turn
    // failed") is not shown for the turn that is the current one.
    assert.equal(await failed.evaluate((node) => node.previousElementSibling.previousElementSibling.querySelector('.text')?.textContent), 'please do the thing');
    const colour = await failed.locator('strong').evaluate((node) => getComputedStyle(node).color);
    const [r, g, b] = colour.match(/\d+/g).map(Number);
    assert.ok(r > 150 && g < 80 && b < 80, `red: ${colour}`);
    assert.equal(await page.getByText('The previous turn failed', { exact: false }).filter({ visible: true }).count(), 0);
    // The sidebar marks it.
    const row = page.locator('#conversation-list li.conv.selected');
    await row.locator('.row-badge.failed', { hasText: 'failed' }).waitFor();

    // After a reload, from the stored history and the conversation's last turn.
    await page.reload();
    await failed.waitFor();
    await row.locator('.row-badge.failed').waitFor();

    await failed.locator('button', { hasText: 'Retry' }).click();
    await page.locator('#items .item.agent-message', { hasText: 'Second time lucky.' }).waitFor();
    await waitIdle(page);
    // The turn ran again with the same message: it was not posted a second time.
    assert.deepEqual(await page.locator('#items .item.user-message .text').allTextContents(), ['please do the thing']);
    // The failure stays in the history, without its Retry; the sidebar mark is gone.
    assert.equal(await failed.count(), 1);
    assert.equal(await failed.locator('button').count(), 0);
    await row.locator('.row-badge').waitFor({ state: 'detached' });
  }));

test('an interrupted turn says so on the turn, and the sidebar marks the conversation', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    // The answer has begun and the rest is held: the turn runs until the user stops it.
    const gate = fake.hold({ text: ' never sent: the user stops it first' });
    await startConversation(page, 'start talking');
    await gate.write('A long answer that will not be finished');
    await page.locator('#items .item.agent-message.status-running .md', { hasText: 'A long' }).waitFor();
    await page.click('#interrupt');
    const ended = page.locator('#items .turn-end.interrupted');
    await ended.waitFor();
    assert.match(await ended.textContent(), /^This turn was interrupted\./);
    await page.locator('#items .item.agent-message.status-interrupted').waitFor();
    await page.locator('#conversation-list li.conv.selected .row-badge.interrupted', { hasText: 'interrupted' }).waitFor();
  }));

test('the retry line offers Retry now: the next attempt is made at once', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { retry: { initialDelayMs: 60_000, maxDelayMs: 60_000 } } }, async ({ page, fake }) => {
    fake.push({ status: 500, message: 'upstream down' });
    fake.push({ text: 'Through at last.' });
    await startConversation(page, 'try once more');
    const line = page.locator('#status-lines .line.retry');
    await line.waitFor();
    await line.getByRole('button', { name: 'Retry now' }).click();
    await page.locator('#items .item.agent-message', { hasText: 'Through at last.' }).waitFor();
    await line.waitFor({ state: 'detached' });
    await waitIdle(page);
    assert.equal(fake.requests.length, 2, 'the second attempt was made without the wait');
  }));

test('the retry line offers Stop: the turn ends at once, failed, with a Retry that runs it again', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { retry: { initialDelayMs: 60_000, maxDelayMs: 60_000 } } }, async ({ page, fake }) => {
    fake.push({ status: 500, message: 'upstream down' });
    await startConversation(page, 'try once more');
    const line = page.locator('#status-lines .line.retry');
    await line.waitFor();
    assert.match(await line.textContent(), /Attempt 2 of 10 in (60|59) s/);
    await screenshot(page, 'retry-line');
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      await checkAxe(page, `the retry line, ${scheme}`);
    }
    await line.getByRole('button', { name: 'Stop' }).focus();
    await page.keyboard.press('Enter');
    // Stopped while it waited to try again: the turn failed with the provider's error.
    const ended = page.locator('#items .turn-end.failed');
    await ended.waitFor();
    assert.match(await ended.textContent(), /stopped while waiting to try again/);
    await line.waitFor({ state: 'detached' });
    await waitIdle(page);
    assert.equal(fake.requests.length, 1, 'no second attempt was made');
    // The line went with the focus on its button: the focus is in the message box.
    assert.equal(await page.evaluate(() => document.activeElement.id), 'message');
    // Its Retry runs it again.
    fake.push({ text: 'Through on the retry.' });
    await ended.getByRole('button', { name: 'Retry' }).click();
    await page.locator('#items .item.agent-message', { hasText: 'Through on the retry.' }).waitFor();
  }));
