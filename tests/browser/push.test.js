// "Notify me on this device" with pushes: turned on, the page asks the service's key, subscribes
// this browser and hands the subscription to the service, which lists it; at the next start the
// service is told of the browser's current subscription again; turned off, both ends forget it.
// The service worker shows a push as a notification (delivered through the debugging protocol,
// as the browser's push service would), and a click opens the conversation it names in the
// window already open. While the page is open but hidden, the page's own cue is a notification
// shown through the service worker too.
//
// Headless Chromium has no push service to subscribe with (`pushManager.subscribe` never
// settles), so the page's PushManager is replaced by one that hands out a subscription of a
// push service that does not exist; everything else is the browser's own.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { TEST_TIMEOUT, WAIT_MS, setHidden, startConversation, waitForReply, waitIdle, withUi } = require('./harness');

const ENDPOINT = 'https://push.example.invalid/send/this-browser';

// A browser's subscription keys: its P-256 public key and its authentication secret.
function browserKeys() {
  const ecdh = crypto.createECDH('prime256v1');
  ecdh.generateKeys();
  return { p256dh: ecdh.getPublicKey().toString('base64url'), auth: crypto.randomBytes(16).toString('base64url') };
}

// Replaces the page's PushManager: `subscribe` hands out a subscription of ENDPOINT (and records
// the key it was given), `getSubscription` gives it back, `unsubscribe` ends it.
function fakePushManager(context, keys) {
  return context.addInitScript(
    ({ endpoint, keys }) => {
      const record = { subscribed: 0, unsubscribed: 0, key: null, subscription: null };
      window.__push = record;
      const toBase64url = (bytes) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
      PushManager.prototype.subscribe = async function subscribe(options) {
        const key = new Uint8Array(options.applicationServerKey);
        record.subscribed++;
        record.key = toBase64url(key);
        record.subscription = {
          endpoint,
          expirationTime: null,
          options: { userVisibleOnly: options.userVisibleOnly, applicationServerKey: key.buffer },
          toJSON: () => ({ endpoint, expirationTime: null, keys }),
          unsubscribe: async () => {
            record.unsubscribed++;
            record.subscription = null;
            return true;
          },
        };
        return record.subscription;
      };
      PushManager.prototype.getSubscription = async function getSubscription() {
        return record.subscription;
      };
    },
    { endpoint: ENDPOINT, keys },
  );
}

// The page's own API client, for what the page's device may see.
function pageApi(page, method, path) {
  return page.evaluate(([m, p]) => import('/assets/api.js').then((api) => api.api(m, p)), [method, path]);
}

// Notifications allowed and the fake push service in place, the page reloaded under its
// service worker; answers the service's base URL.
async function withFakePush(page, context, server) {
  const base = server().base;
  await context.grantPermissions(['notifications'], { origin: base });
  await fakePushManager(context, browserKeys());
  await page.reload();
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
  return base;
}

// The notifications the service worker shows now, as plain data.
function shownNotifications(page) {
  return page.evaluate(async () => {
    const registration = await navigator.serviceWorker.ready;
    return (await registration.getNotifications()).map((n) => ({ title: n.title, body: n.body, tag: n.tag, url: n.data && n.data.url, icon: n.icon }));
  });
}

async function waitForNotification(page, tag, ms = WAIT_MS) {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = (await shownNotifications(page)).find((n) => n.tag === tag);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no notification tagged ${tag} within ${WAIT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// What delivers pushes to the service worker as the push service would: the debugging
// protocol's, on a session kept open while the test runs (detached at once, a delivery may be
// dropped).
async function pushService(context, page, base) {
  const cdp = await context.newCDPSession(page);
  const registrations = [];
  cdp.on('ServiceWorker.workerRegistrationUpdated', (event) => registrations.push(...event.registrations));
  await cdp.send('ServiceWorker.enable');
  const deadline = Date.now() + WAIT_MS;
  let registration;
  while (!(registration = registrations.find((r) => r.scopeURL === `${base}/` && !r.isDeleted))) {
    if (Date.now() > deadline) throw new Error('the service worker is not registered');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const deliver = (message) =>
    cdp.send('ServiceWorker.deliverPushMessage', { origin: base, registrationId: registration.registrationId, data: JSON.stringify(message) });
  return {
    // Delivers `message` and resolves with the notification it shows (by its tag). On a busy
    // machine headless Chromium now and then loses a notification shown during a push event
    // (`showNotification` resolves, `getNotifications` never lists it), so a push not shown
    // within a few seconds is delivered again, as a push service would redeliver it.
    async deliver(message) {
      for (let attempt = 1; ; attempt++) {
        await deliver(message);
        try {
          return await waitForNotification(page, message.tag, attempt < 3 ? 5000 : WAIT_MS);
        } catch (error) {
          if (attempt === 3) throw error;
        }
      }
    },
  };
}

test('notify me on this device: subscribed to pushes, renewed at start, forgotten when turned off', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, context, server }) => {
    const base = await withFakePush(page, context, server);
    const box = page.locator('#notify');
    assert.equal(await box.getAttribute('data-mode'), 'off');
    assert.equal(await page.locator('#notify-state').isHidden(), true);

    await box.click();
    await page.locator('#notify[data-mode="push"]').waitFor();
    assert.equal(await box.isChecked(), true);
    assert.equal(await page.locator('#notify-state').textContent(), 'Also while the page is closed.');
    const { public_key: key } = await (await fetch(`${base}/api/push/key`)).json();
    const push = await page.evaluate(() => ({ subscribed: window.__push.subscribed, key: window.__push.key }));
    assert.deepEqual(push, { subscribed: 1, key });
    const kept = await page.evaluate(() => JSON.parse(localStorage.getItem('openvaala.push.subscription')));
    assert.equal(kept.endpoint, ENDPOINT);
    assert.match(kept.id, /^ps_/);
    const listed = (await pageApi(page, 'GET', '/api/push/subscriptions')).subscriptions;
    assert.deepEqual(
      listed.map((s) => [s.id, s.push_service]),
      [[kept.id, 'https://push.example.invalid']],
    );

    // At the next start the browser has no subscription (this fake keeps none across pages): the
    // page subscribes again, and the service knows the endpoint by the same id.
    await page.reload();
    await page.waitForFunction(() => window.__push.subscribed === 1);
    await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
    assert.equal(await box.isChecked(), true);
    assert.equal(await box.getAttribute('data-mode'), 'push');
    const again = (await pageApi(page, 'GET', '/api/push/subscriptions')).subscriptions;
    assert.deepEqual(
      again.map((s) => s.id),
      [kept.id],
    );

    // Turned off: the browser's subscription ends, and the service's.
    await box.click();
    await page.locator('#notify[data-mode="off"]').waitFor();
    assert.equal(await box.isChecked(), false);
    assert.equal(await page.evaluate(() => window.__push.unsubscribed), 1);
    assert.equal(await page.evaluate(() => localStorage.getItem('openvaala.push.subscription')), null);
    assert.deepEqual((await pageApi(page, 'GET', '/api/push/subscriptions')).subscriptions, []);
  }));

test('the service worker shows a push, and its click opens the conversation in the open window', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, context, server }) => {
    const base = server().base;
    await context.grantPermissions(['notifications'], { origin: base });
    const id = await startConversation(page, 'a conversation to come back to');
    await waitForReply(page, 'a conversation to come back to');
    await page.click('#new-conversation');
    await page.locator('#main[data-view="new"]').waitFor();
    await page.waitForFunction(() => navigator.serviceWorker.controller !== null);

    const url = `/#/c/${encodeURIComponent(id)}`;
    const pushes = await pushService(context, page, base);
    const shown = await pushes.deliver({ title: 'Approval needed', body: '`shell` waits for your answer', url, tag: 'approval-test' });
    assert.deepEqual(shown, {
      title: 'Approval needed',
      body: '`shell` waits for your answer',
      tag: 'approval-test',
      url: `${base}${url}`,
      icon: `${base}/assets/icons/icon-192.png`,
    });

    // A push that names another origin opens the app's own page, never elsewhere.
    assert.equal((await pushes.deliver({ title: 'Elsewhere?', body: '', url: 'https://example.com/x', tag: 'elsewhere' })).url, `${base}/`);

    // Clicked: the open window shows the conversation (what notificationclick runs; a click on a
    // notification cannot be made in a headless browser).
    const [worker] = context.serviceWorkers();
    assert.ok(worker, 'the service worker is running');
    await worker.evaluate((path) => openFromNotification(path), url);
    await page.waitForURL(`${base}${url}`);
    await waitIdle(page);
    assert.equal(await page.locator('#conversation-title').textContent(), 'a conversation to come back to');

  }));

test('while the page is open but hidden, its own cue is a notification of the service worker', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, context, server }) => {
    const base = await withFakePush(page, context, server);
    await page.click('#notify');
    await page.locator('#notify[data-mode="push"]').waitFor();

    const id = await startConversation(page, 'first');
    await waitForReply(page, 'first');
    await setHidden(page, true);
    await page.fill('#message', 'done while away');
    await page.press('#message', 'Enter');
    const shown = await waitForNotification(page, `openvaala-${id}`);
    assert.equal(shown.body, 'The turn is done.');
    assert.equal(shown.url, `${base}/#/c/${encodeURIComponent(id)}`);
    await setHidden(page, false);
  }));
