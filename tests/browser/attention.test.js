// When the page is not shown (another tab, a minimised window): the tab's title is marked when
// a turn of the open conversation ends or fails, or an approval waits, until the page is seen
// again. Desktop notifications say the same once the user turns them on; the browser is asked
// for its permission then, and only then. (Headless Chromium is always "visible", so the tests
// say otherwise through document.hidden and a visibilitychange event, as a browser would; the
// browser's Notification is replaced by one that records what it is asked to show.)
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { ASKS_FIRST, TEST_TIMEOUT, setHidden, startConversation, waitIdle, withUi } = require('./harness');

const marked = (page) => page.waitForFunction(() => document.title.startsWith('● '));

test('the tab title is marked when a turn ends or fails while the page is hidden, until it is shown', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    await startConversation(page, 'first question');
    await page.locator('#items .item.agent-message', { hasText: 'Echo: first question' }).waitFor();
    await waitIdle(page);
    const title = await page.title();
    assert.match(title, /^first question — OpenVaala$/, 'a turn that ends in view leaves no mark');

    // The reader goes to another tab while the agent works; the turn ends meanwhile.
    const gate = fake.hold({ text: 'Done while you were away.' });
    await page.fill('#message', 'take your time');
    await page.press('#message', 'Enter');
    await gate.requested;
    await setHidden(page, true);
    gate.release();
    await marked(page);
    assert.equal(await page.title(), `● ${title}`);
    await page.locator('#items .item.agent-message', { hasText: 'Done while you were away.' }).waitFor();
    // Coming back clears it.
    await setHidden(page, false);
    assert.equal(await page.title(), title);

    // A failed turn marks it too.
    fake.push({ status: 400, message: 'the model refuses this request' });
    await setHidden(page, true);
    await page.fill('#message', 'this one fails');
    await page.press('#message', 'Enter');
    await page.locator('#items .turn-end.failed').waitFor();
    await marked(page);
    await setHidden(page, false);
    assert.equal(await page.title(), title);
    await page.fill('#message', 'and in view');
    await page.press('#message', 'Enter');
    await page.locator('#items .item.agent-message', { hasText: 'Echo: and in view' }).waitFor();
    await waitIdle(page);
    assert.equal(await page.title(), title);
  }));

test('desktop notifications: asked for when turned on, shown when an approval waits or a turn ends unseen', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page }) => {
    await page.addInitScript(() => {
      window.__notifications = [];
      window.__asked = 0;
      window.__answer = 'denied';
      window.Notification = class {
        static permission = 'default';
        static async requestPermission() {
          window.__asked++;
          this.permission = window.__answer;
          return this.permission;
        }
        constructor(title, options) {
          window.__notifications.push({ title, body: options.body });
        }
        close() {}
      };
    });
    await page.reload();
    await page.locator('#main[data-view="new"] #message').waitFor();
    const box = page.locator('#notify');
    assert.equal(await box.isChecked(), false, 'off unless turned on');
    assert.equal(await page.evaluate(() => window.__asked), 0, 'the page does not ask by itself');

    // The browser refuses: the setting stays off and the page says why.
    await box.click();
    await page.locator('#banners .banner.notice', { hasText: 'does not allow this page to show notifications' }).waitFor();
    assert.equal(await box.isChecked(), false);
    // The user allows it in the browser's settings, and turns the setting on again.
    await page.evaluate(() => {
      window.Notification.permission = 'default';
      window.__answer = 'granted';
    });
    await box.click();
    await page.waitForFunction(() => document.getElementById('notify').checked);
    assert.equal(await page.evaluate(() => window.__asked), 2);

    // Away from the page, the agent asks for an approval: the title and a notification say so.
    await setHidden(page, true);
    await startConversation(page, '/shell echo hello');
    await page.locator('#items .approval.asking').waitFor();
    await marked(page);
    const shown = await page.evaluate(() => window.__notifications);
    assert.equal(shown.length, 1);
    // Titled by what the directive is given (a title holds no demo directive).
    assert.match(shown[0].title, /^echo hello/);
    assert.match(shown[0].body, /^Waiting for your answer: .* needs approval\.$/);
    await setHidden(page, false);
    assert.doesNotMatch(await page.title(), /●/);

    // In view, answering and the turn's end notify nobody.
    await page.locator('#items .approval.asking button', { hasText: 'Allow once' }).click();
    await page.locator('#main[data-state="idle"]').waitFor();
    assert.equal((await page.evaluate(() => window.__notifications)).length, 1);
    assert.doesNotMatch(await page.title(), /●/);

    // Away again, a turn ends.
    await setHidden(page, true);
    await page.fill('#message', 'a plain question');
    await page.press('#message', 'Enter');
    await page.locator('#items .item.agent-message', { hasText: 'a plain question' }).waitFor();
    await marked(page);
    const all = await page.evaluate(() => window.__notifications);
    assert.equal(all.length, 2);
    assert.equal(all[1].body, 'The turn is done.');
    await setHidden(page, false);
    await page.locator('#main[data-state="idle"]').waitFor();

    // Turned off, nothing more is shown, but the title is still marked.
    await box.click();
    assert.equal(await box.isChecked(), false);
    await setHidden(page, true);
    await page.fill('#message', '/shell echo again');
    await page.press('#message', 'Enter');
    await page.locator('#items .approval.asking').waitFor();
    await marked(page);
    assert.equal((await page.evaluate(() => window.__notifications)).length, 2);
    await setHidden(page, false);
  }));
