// Signing other devices in: a link of `openvaala pair` opened in a browser that never saw the
// service (its /pair page, the suggested name, the session cookie the page cannot read, the
// link refused the second time), changes from that cookie session (their CSRF header), the
// "Devices and tokens" view (this browser marked, another device signed out from there, this
// one signing itself out), the sign-in view (what it says, a pasted token), and a device that
// may only read (nothing offered that would change something). Each device is a browser
// profile of its own.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const {
  ASKS_FIRST,
  BIN,
  TEST_TIMEOUT,
  WAIT_MS,
  checkAxe,
  launchBrowser,
  screenshot,
  startConversation,
  waitForReply,
  withUi,
} = require('./harness');

// An iPhone 12–15's screen.
const PHONE_390 = { width: 390, height: 844 };
const DESKTOP = { width: 1400, height: 900 };

// What a page logs when the service refuses it: a signed-out browser's first question, a used
// link, a stream of a revoked session.
const REFUSED = [/status of 401/, /status of 403/, /EventSource/];

// `openvaala pair` for the test's service, as a person runs it on the service's machine: the
// link it prints.
function pairLink(server, scope = 'full') {
  const printed = execFileSync(BIN, ['pair', '--no-qr', '--scope', scope, '--data-dir', path.join(server.root, 'data')], {
    encoding: 'utf8',
    env: { ...process.env, HOME: path.join(server.root, 'home'), NO_COLOR: '1' },
    // What it says on stderr (how long the link works) is for the person.
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const link = printed.trim().split('\n').pop();
  assert.match(link, /\/pair#code=[0-9a-f]{32}$/);
  assert.ok(link.startsWith(`${server.base}/pair#code=`), `${link} is the test service's`);
  return link;
}

// Browsers of other devices: fresh profiles, their page errors collected (what `allowed`
// matches is expected), all closed by `closeAll`.
function deviceBrowsers(root) {
  const contexts = [];
  const errors = [];
  return {
    errors,
    async open(name, { viewport = DESKTOP, allowed = [] } = {}) {
      const context = await launchBrowser(path.join(root, `device-${name}`), { viewport });
      contexts.push(context);
      const page = context.pages()[0] || (await context.newPage());
      page.setDefaultTimeout(WAIT_MS);
      page.on('pageerror', (error) => errors.push(`${name}: page error: ${error.stack || error.message}`));
      page.on('console', (message) => {
        if (message.type() !== 'error' || allowed.some((pattern) => pattern.test(message.text()))) return;
        errors.push(`${name}: console error: ${message.text()}`);
      });
      return { context, page };
    },
    async closeAll() {
      for (const context of contexts) await context.close().catch(() => {});
    },
  };
}

// Runs `body` with the other devices' browsers, and fails on what they logged.
async function withDevices(root, body) {
  const devices = deviceBrowsers(root);
  try {
    await body(devices);
  } finally {
    await devices.closeAll();
  }
  assert.deepEqual(devices.errors, [], 'the devices’ pages logged errors');
}

// The service's API with only the given cookie: `localhost` rather than the address the tests'
// own requests carry the service's token to.
function withCookie(server, apiPath, cookie, init = {}) {
  const url = `${server.base.replace('127.0.0.1', 'localhost')}${apiPath}`;
  return fetch(url, { ...init, headers: { ...(init.headers || {}), cookie: `openvaala_session=${cookie}` } });
}

// Signs a fresh browser in with `link`, as a person does: opens it, names the device, presses
// the button; resolves once the app is open.
async function signIn(page, link, name) {
  await page.goto(link);
  await page.locator('#pair-form').waitFor();
  await page.fill('#pair-name', name);
  await page.click('#pair-submit');
  await page.waitForURL((url) => url.pathname === '/' && !url.hash.includes('code'));
  await page.locator('#main[data-view="new"]').waitFor();
}

test('a device signs in with a pairing link: cookie unseen by the page, changes carry the CSRF token, the link works once', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, server, root }) => {
    const service = server();
    await startConversation(page, 'made on the computer');
    await waitForReply(page, 'made on the computer');
    const link = pairLink(service);

    await withDevices(root, async (devices) => {
      const { context, page: phone } = await devices.open('phone');
      await phone.goto(link);
      await phone.locator('#pair-form').waitFor();
      // The code is read and dropped from the address at once.
      assert.equal(new URL(phone.url()).hash, '');
      assert.equal(new URL(phone.url()).pathname, '/pair');
      assert.equal(await phone.locator('#pair-host').textContent(), new URL(service.base).host);
      // A name is suggested from the browser and its system, and may be changed.
      assert.match(await phone.inputValue('#pair-name'), /\S+ on \S+/);
      assert.equal(await phone.evaluate(() => document.activeElement.id), 'pair-submit');
      await checkAxe(phone, 'pair page');
      await screenshot(phone, 'pair-page-desktop');
      await phone.setViewportSize(PHONE_390);
      await screenshot(phone, 'pair-page-phone');

      await phone.fill('#pair-name', 'Test phone');
      await phone.click('#pair-submit');
      await phone.waitForURL(`${service.base}/`);
      // The app opens, signed in: the conversations load.
      await phone.locator('#conversation-list a.conv-link', { hasText: 'made on the computer' }).waitFor({ state: 'attached' });
      await phone.locator('#main[data-view="new"] #message').waitFor();

      // The session is a cookie the page cannot read: HttpOnly, SameSite=Strict; no token is kept.
      assert.equal(await phone.evaluate(() => document.cookie), '');
      assert.equal(await phone.evaluate(() => localStorage.getItem('openvaala.token')), null);
      const cookie = (await context.cookies()).find((c) => c.name === 'openvaala_session');
      assert.ok(cookie, 'the session cookie is set');
      assert.equal(cookie.httpOnly, true);
      assert.equal(cookie.sameSite, 'Strict');
      const session = await phone.evaluate(() => fetch('/api/session').then((r) => r.json()));
      assert.equal(session.via, 'cookie');
      assert.equal(session.name, 'Test phone');
      assert.equal(session.scope, 'full');
      assert.match(session.csrf, /^[0-9a-f]+$/);

      // The cookie alone does not change anything: a change needs the CSRF token too, which
      // the page sends.
      const bare = await withCookie(service, '/api/conversations', cookie.value, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ message: 'no CSRF token' }),
      });
      assert.equal(bare.status, 403);
      assert.match((await bare.json()).error.message, /x-csrf-token/);
      await phone.setViewportSize(DESKTOP);
      await startConversation(phone, 'sent from the phone');
      await waitForReply(phone, 'sent from the phone');
      // Seen on the computer as any conversation is.
      await page.locator('#conversation-list a.conv-link', { hasText: 'sent from the phone' }).waitFor();

      // The link was used: opened again, elsewhere, it says so and what to do.
      const { page: other } = await devices.open('other', { allowed: REFUSED });
      await other.goto(link);
      await other.locator('#pair-form').waitFor();
      await other.click('#pair-submit');
      const refusal = other.locator('#pair-error');
      await refusal.filter({ hasText: 'used already or has expired' }).waitFor();
      assert.match(await refusal.textContent(), /openvaala pair again/);
      assert.equal(await other.locator('#pair-form').isHidden(), true);
      assert.equal(new URL(other.url()).pathname, '/pair');
      await screenshot(other, 'pair-page-used');

      // Without a code, the page says where one comes from.
      await other.goto(`${service.base}/pair`);
      await other.locator('#pair-error', { hasText: 'openvaala pair' }).waitFor();
      assert.equal(await other.locator('#pair-form').isHidden(), true);
    });
  }));

test('devices: listed with this browser marked, another signed out from here, this one signing itself out', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, server, root }) => {
    const service = server();
    await withDevices(root, async (devices) => {
      const { context, page: phone } = await devices.open('phone', { allowed: REFUSED });
      await signIn(phone, pairLink(service), 'Test phone');
      const { page: tablet } = await devices.open('tablet', { allowed: REFUSED });
      await signIn(tablet, pairLink(service), 'Test tablet');
      const made = await fetch(`${service.base}/api/tokens`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'backup script', scope: 'read' }),
      });
      assert.equal(made.status, 201);

      // The phone's list: both devices and the token, the phone marked as this browser.
      await phone.click('#devices-link');
      await phone.waitForURL(/#\/devices$/);
      await phone.locator('#devices-view[data-state="loaded"]').waitFor();
      assert.equal(await phone.locator('#conversation-title').textContent(), 'Devices and tokens');
      assert.equal(await phone.getAttribute('#devices-link', 'aria-current'), 'page');
      assert.match(await phone.locator('#this-device').textContent(), /Test phone.*full access/);
      const rows = phone.locator('#devices-list .device-row');
      assert.equal(await rows.count(), 3);
      const mine = rows.filter({ hasText: 'Test phone' });
      assert.equal(await mine.locator('.this-device-badge').textContent(), 'this browser');
      assert.match(await mine.locator('.device-meta').textContent(), /Device.*full access.*signed in just now.*last used just now/);
      const script = rows.filter({ hasText: 'backup script' });
      assert.match(await script.locator('.device-meta').textContent(), /Token.*read only.*never used/);
      assert.equal(await script.locator('.this-device-badge').count(), 0);
      await checkAxe(phone, 'devices view');
      await screenshot(phone, 'devices-desktop');
      await phone.setViewportSize(PHONE_390);
      await screenshot(phone, 'devices-phone');
      await phone.setViewportSize(DESKTOP);

      // The tablet is signed out from the phone: gone from the list, and the tablet, which was
      // following, is at the sign-in view, told its sign-in ended.
      await rows.filter({ hasText: 'Test tablet' }).getByRole('button', { name: /Sign out the device “Test tablet”/ }).click();
      await rows.filter({ hasText: 'Test tablet' }).waitFor({ state: 'detached' });
      assert.equal(await rows.count(), 2);
      await tablet.locator('#signin:not([hidden])').waitFor();
      assert.match(await tablet.locator('#signin-why').textContent(), /sign-in has ended/);
      assert.equal(await tablet.locator('#app').isHidden(), true);

      // The computer (the service's own token) lists the phone, and is not it.
      await page.goto(`${service.base}/#/devices`);
      await page.locator('#devices-view[data-state="loaded"]').waitFor();
      assert.match(await page.locator('#this-device').textContent(), /the service’s own token/);
      assert.equal(await page.locator('#devices-list .this-device-badge').count(), 0);
      assert.equal(await page.locator('#devices-list .device-row', { hasText: 'Test phone' }).count(), 1);

      // The phone signs itself out: the sign-in view, and its cookie no longer counts.
      const cookie = (await context.cookies()).find((c) => c.name === 'openvaala_session').value;
      assert.equal((await withCookie(service, '/api/session', cookie)).status, 200);
      await phone.click('#sign-out');
      await phone.locator('#signin:not([hidden])').waitFor();
      assert.match(await phone.locator('#signin-why').textContent(), /signed out/);
      assert.equal(await phone.title(), 'Sign in — OpenVaala');
      assert.equal((await withCookie(service, '/api/session', cookie)).status, 401);
      assert.equal(await phone.evaluate(() => fetch('/api/session').then((r) => r.status)), 401);
      assert.equal((await context.cookies()).some((c) => c.name === 'openvaala_session'), false, 'the cookie is cleared');
      const left = (await (await fetch(`${service.base}/api/tokens`)).json()).tokens.map((t) => t.name);
      assert.deepEqual(left, ['backup script']);
    });
  }));

test('the sign-in view: how to sign in, a pasted token checked before it is kept', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ server, root }) => {
    const service = server();
    await withDevices(root, async (devices) => {
      const { page: fresh } = await devices.open('fresh', { allowed: REFUSED });
      await fresh.goto(`${service.base}/`);
      await fresh.locator('#signin:not([hidden])').waitFor();
      assert.equal(await fresh.locator('#app').isHidden(), true);
      assert.match(await fresh.locator('#signin-why').textContent(), /not signed in/);
      const text = await fresh.locator('#signin').textContent();
      assert.match(text, /run openvaala pair/);
      assert.match(text, /scan its QR code/);
      assert.equal(await fresh.evaluate(() => document.activeElement.id), 'signin-title');
      await checkAxe(fresh, 'sign-in view');
      await screenshot(fresh, 'signin-desktop');
      await fresh.setViewportSize(PHONE_390);
      await screenshot(fresh, 'signin-phone');
      await fresh.emulateMedia({ colorScheme: 'dark' });
      await checkAxe(fresh, 'sign-in view, dark, phone');
      await screenshot(fresh, 'signin-phone-dark');
      await fresh.emulateMedia({ colorScheme: 'light' });

      // A wrong token is refused and not kept.
      await fresh.fill('#signin-token', 'not-a-token-of-this-service');
      await fresh.click('#signin-use');
      await fresh.locator('#signin-error', { hasText: 'does not accept this token' }).waitFor();
      assert.equal(await fresh.evaluate(() => localStorage.getItem('openvaala.token')), null);
      // A named token is kept, and the app opens with it.
      const made = await (
        await fetch(`${service.base}/api/tokens`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'pasted' }),
        })
      ).json();
      await fresh.fill('#signin-token', made.token);
      await fresh.click('#signin-use');
      await fresh.locator('#main[data-view="new"] #message').waitFor();
      assert.equal(await fresh.evaluate(() => localStorage.getItem('openvaala.token')), made.token);
      await fresh.setViewportSize(DESKTOP);
      await startConversation(fresh, 'with a pasted token');
      await waitForReply(fresh, 'with a pasted token');
      // Forgetting it returns to the sign-in view.
      await fresh.goto(`${service.base}/#/devices`);
      await fresh.locator('#devices-view[data-state="loaded"]').waitFor();
      assert.match(await fresh.locator('#this-device').textContent(), /the token “pasted” with full access/);
      await fresh.click('#forget-token');
      await fresh.locator('#signin:not([hidden])').waitFor();
      assert.equal(await fresh.evaluate(() => localStorage.getItem('openvaala.token')), null);
      assert.equal(await fresh.locator('#signin-kept').isHidden(), true);

      // A kept token revoked meanwhile: the view says so, and offers to forget it. (Signed in
      // again, the page is where it was.)
      await fresh.fill('#signin-token', made.token);
      await fresh.click('#signin-use');
      await fresh.locator('#devices-view[data-state="loaded"]').waitFor();
      assert.equal((await fetch(`${service.base}/api/tokens/${made.id}`, { method: 'DELETE' })).status, 204);
      await fresh.reload();
      await fresh.locator('#signin:not([hidden])').waitFor();
      assert.match(await fresh.locator('#signin-why').textContent(), /token this browser kept is not accepted/);
      await fresh.click('#signin-forget');
      await fresh.locator('#signin-why', { hasText: 'not signed in' }).waitFor();
      assert.equal(await fresh.locator('#signin-kept').isHidden(), true);
      assert.equal(await fresh.evaluate(() => localStorage.getItem('openvaala.token')), null);
    });
  }));

test('a device that may only read: nothing offered that would change something, and why', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page, server, root }) => {
    const service = server();
    const id = await startConversation(page, '/shell echo waiting');
    await page.locator('#items .approval.asking').waitFor();

    await withDevices(root, async (devices) => {
      const { context, page: reader } = await devices.open('reader', { viewport: PHONE_390, allowed: REFUSED });
      await signIn(reader, pairLink(service, 'read'), 'Reader');
      assert.equal(await reader.evaluate(() => document.body.classList.contains('read-only')), true);
      // The landing page: no message box, a note saying why, no new conversation.
      assert.equal(await reader.locator('#composer').isHidden(), true);
      assert.match(await reader.locator('#read-only-note').textContent(), /may only read/);
      assert.equal(await reader.locator('#new-conversation').isDisabled(), true);

      // The conversation with its waiting approval: followed, not answered.
      await reader.goto(`${service.base}/#/c/${encodeURIComponent(id)}`);
      const card = reader.locator('.approval.asking').first();
      await card.waitFor();
      await card.locator('.approval-read-only', { hasText: 'answer from a device with full access' }).waitFor();
      assert.equal(await reader.locator('.approval.asking button[data-decision]:visible').count(), 0);
      assert.equal(await reader.locator('#composer').isHidden(), true);
      assert.equal(await reader.locator('#read-only-note').isVisible(), true);
      await checkAxe(reader, 'a conversation on a device that may only read');
      await screenshot(reader, 'read-only-phone');

      // The devices view: its own session and why the list is not shown.
      await reader.goto(`${service.base}/#/devices`);
      await reader.locator('#devices-view[data-state="loaded"]').waitFor();
      assert.match(await reader.locator('#this-device').textContent(), /Reader.*read-only access/);
      assert.match(await reader.locator('#devices-status').textContent(), /may only read/);
      assert.equal(await reader.locator('#devices-list').isHidden(), true);

      // Notifications: the page's own (pushes are for devices with full access).
      await context.grantPermissions(['notifications'], { origin: service.base });
      await reader.click('#sidebar-open');
      await reader.click('#notify');
      await reader.locator('#notify[data-mode="page"]').waitFor();
      await reader.locator('#banners .banner.notice', { hasText: 'may only read' }).waitFor();
    });
    // The approval still waits for the computer's answer.
    await page.locator('#items .approval.asking button', { hasText: 'Allow once' }).click();
    await page.locator('#main[data-state="idle"]').waitFor();
  }));
