// The user's text is never lost. Editing a waiting message holds it back (the agent cannot take
// the old text meanwhile); waiting messages lost in a restart come back into the message box with
// a notice; error banners clear once things work again; the send mode goes back to the default
// after a send.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, apiGet, conversationId, startConversation, waitIdle, waitRunning, withUi } = require('./harness');

test('editing a waiting message holds it back, so the agent never takes the old text', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake, server }) => {
    const first = fake.hold({ text: 'First answer.' });
    await startConversation(page, 'start working');
    const id = conversationId(page);
    await waitRunning(page);
    await page.fill('#message', 'first draft');
    await page.press('#message', 'Enter');
    const waiting = page.locator('#pending-list li.pending-item', { hasText: 'first draft' });
    await waiting.locator('button', { hasText: 'Edit' }).click();

    const editing = page.locator('#pending-list li.pending-item.editing');
    await editing.locator('.held-note', { hasText: 'Held back while you edit' }).waitFor();
    // Held back: the service has nothing waiting while the user edits.
    assert.deepEqual((await apiGet(server(), `/api/conversations/${id}/pending`)).pending, []);

    // The running turn ends while the user is still editing: the old text is not taken.
    first.release();
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'First answer.' }).waitFor();
    await waitIdle(page);
    const area = editing.locator('textarea');
    assert.equal(await area.inputValue(), 'first draft');
    await area.fill('second draft');
    await area.press('Enter');

    // Saved: the edited text starts the next turn (the fake echoes it).
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Echo: second draft' }).waitFor();
    await waitIdle(page);
    await editing.waitFor({ state: 'detached' });
    const items = (await apiGet(server(), `/api/conversations/${id}/items`)).items;
    const userTexts = items.filter((item) => item.kind === 'user_message').map((item) => item.text);
    assert.deepEqual(userTexts, ['start working', 'second draft']);
  }));

test('an edit survives a reload of the page, still held back', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake, server }) => {
    const first = fake.hold({ text: 'Done.' });
    await startConversation(page, 'start working');
    const id = conversationId(page);
    await waitRunning(page);
    await page.fill('#message', 'keep me');
    await page.press('#message', 'Enter');
    await page.locator('#pending-list li.pending-item', { hasText: 'keep me' }).locator('button', { hasText: 'Edit' }).click();
    const area = page.locator('#pending-list li.pending-item.editing textarea');
    await area.fill('keep me, edited');

    await page.reload();
    await page.locator('#pending-list li.pending-item.editing .held-note').waitFor();
    assert.equal(await area.inputValue(), 'keep me, edited');
    assert.deepEqual((await apiGet(server(), `/api/conversations/${id}/pending`)).pending, []);
    await page.locator('#pending-list li.pending-item.editing button', { hasText: 'Save' }).click();
    await page.locator('#pending-list li.pending-item:not(.editing)', { hasText: 'keep me, edited' }).waitFor();
    first.release();
    await page.locator('#items .item.agent-message', { hasText: 'Echo: keep me, edited' }).waitFor();
  }));

test('waiting messages lost when the service restarts come back into the message box, with a notice', { timeout: TEST_TIMEOUT }, () =>
  withUi(
    { fake: true, allowConsole: [/ERR_CONNECTION_REFUSED/, /Failed to load resource/] },
    async ({ page, fake, restartServer }) => {
      // The first turn never ends by itself: the restart interrupts it.
      fake.hold({ text: 'never sent: the restart interrupts the turn' });
      await startConversation(page, 'work until the restart');
      await waitRunning(page);
      await page.fill('#message', 'please remember this message');
      await page.press('#message', 'Enter');
      await page.locator('#pending-list li.pending-item', { hasText: 'please remember this message' }).waitFor();
      await page.fill('#message', 'half typed');

      await restartServer();
      // The page reconnects by itself and finds the message gone from the service.
      const notice = page.locator('#banners .banner.notice', { hasText: 'lost' });
      await notice.waitFor();
      assert.match(await notice.textContent(), /1 waiting message was lost: the service restarted.*Its text is back in the message box\./);
      assert.equal(await page.inputValue('#message'), 'please remember this message\n\nhalf typed');
      await page.locator('#pending').waitFor({ state: 'hidden' });
      await page.locator('#items .turn-end.interrupted').waitFor();
    },
  ));

test('a waiting message lost in a restart comes back in one tab only; the other tab is told', { timeout: TEST_TIMEOUT }, () =>
  withUi(
    { fake: true, allowConsole: [/ERR_CONNECTION_REFUSED/, /Failed to load resource/] },
    async ({ page, context, fake, restartServer }) => {
      fake.hold({ text: 'never sent: the restart interrupts the turn' });
      await startConversation(page, 'work until the restart');
      await waitRunning(page);
      const other = await context.newPage();
      await other.goto(page.url());
      await waitRunning(other);
      await page.fill('#message', 'only once please');
      await page.press('#message', 'Enter');
      for (const tab of [page, other]) {
        await tab.locator('#pending-list li.pending-item', { hasText: 'only once please' }).waitFor();
      }

      await restartServer();
      for (const tab of [page, other]) {
        await tab.locator('#banners .banner.notice', { hasText: 'lost' }).waitFor();
      }
      const boxes = [await page.inputValue('#message'), await other.inputValue('#message')];
      assert.deepEqual(boxes.filter((text) => text === 'only once please').length, 1, JSON.stringify(boxes));
      assert.ok(boxes.includes(''), JSON.stringify(boxes));
      // The tab whose box stayed empty says where the text went.
      const told = boxes[0] === '' ? page : other;
      const notice = told.locator('#banners .banner.notice', { hasText: 'lost' });
      assert.match(await notice.textContent(), /put back in the message box of another tab/);
      await other.close();
    },
  ));

test('error banners clear when the next call succeeds or the stream reconnects', { timeout: TEST_TIMEOUT }, () =>
  withUi(
    { allowConsole: [/ERR_CONNECTION_REFUSED/, /Failed to load resource/] },
    async ({ page, restartServer }) => {
      // A refused action (a directory that does not exist), then one that works.
      await page.locator('#main[data-view="new"] #composer').waitFor();
      await page.fill('#cwd', '/no/such/directory');
      await page.fill('#message', 'hello');
      await page.press('#message', 'Enter');
      const refused = page.locator('#banners .banner.error', { hasText: 'working directory' });
      await refused.waitFor();
      await page.fill('#cwd', '');
      await page.press('#message', 'Enter');
      await page.waitForURL(/#\/c\/[^/]+$/);
      await refused.waitFor({ state: 'detached' });
      await waitIdle(page);

      // The service goes away: sending fails and says so; once it is back and the stream
      // reconnects, the banner goes.
      await restartServer(async () => {
        await page.fill('#message', 'while it is down');
        await page.press('#message', 'Enter');
        await page.locator('#banners .banner.error', { hasText: 'does not answer' }).waitFor();
      });
      await page.locator('#banners .banner.error').waitFor({ state: 'detached' });
      // The text is still in the box, to send again.
      assert.equal(await page.inputValue('#message'), 'while it is down');
    },
  ));

test('the send mode goes back to steer after a send', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    const first = fake.hold({ text: 'Done.' });
    await startConversation(page, 'start working');
    await waitRunning(page);
    await page.selectOption('#mode', 'queue');
    await page.fill('#message', 'after this turn');
    await page.press('#message', 'Enter');
    await page.locator('#pending-list li.pending-item .badge.mode-queue').waitFor();
    assert.equal(await page.inputValue('#mode'), 'steer');
    first.release();
    await page.locator('#items .item.agent-message', { hasText: 'Echo: after this turn' }).waitFor();
  }));
