// The web UI as an installable app that opens offline: the manifest (its type, fields and
// icons, and Chromium's own installability checks over the debugging protocol), the service
// worker (active, in control, keeping the app's files and never an API answer), the page opened
// while the service is stopped (from the worker's copy, saying it reconnects, then back by
// itself) and while the device is offline, a stale copy that never hides what the service
// serves, old caches dropped, and on a phone an approval's answers and the waiting messages in
// view right above the message box.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { ASKS_FIRST, TEST_TIMEOUT, WAIT_MS, screenshot, startConversation, waitForReply, waitIdle, withUi } = require('./harness');

// What a page logs while the service is down or the device offline: its API calls and streams
// failing.
const OFFLINE_NOISE = [/ERR_CONNECTION_REFUSED/, /ERR_INTERNET_DISCONNECTED/, /Failed to load resource/];

// An iPhone 12–15's screen.
const PHONE_390 = { width: 390, height: 844 };

// Waits until `check` (run in the page, which may be async: Cache Storage is) is true, asking
// again every 100 ms (page.waitForFunction takes a promise for a true answer).
async function waitInPage(page, check, arg) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    if (await page.evaluate(check, arg)) return;
    if (Date.now() > deadline) throw new Error(`not true within ${WAIT_MS} ms: ${check}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// The page is controlled by the service worker, which has kept the app's files.
async function waitForWorker(page) {
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
  await waitInPage(page, async () => {
    const names = await caches.keys();
    if (names.length !== 1) return false;
    const cache = await caches.open(names[0]);
    return !!(await cache.match('/')) && !!(await cache.match('/assets/main.js'));
  });
}

// Every URL kept in the page's Cache Storage, by cache name.
function cachedUrls(page) {
  return page.evaluate(async () => {
    const kept = {};
    for (const name of await caches.keys()) {
      const cache = await caches.open(name);
      kept[name] = (await cache.keys()).map((request) => request.url);
    }
    return kept;
  });
}

// The width and height a PNG's header gives.
function pngSize(bytes) {
  assert.equal(bytes.subarray(1, 4).toString('latin1'), 'PNG');
  return `${bytes.readUInt32BE(16)}x${bytes.readUInt32BE(20)}`;
}

test('installable: a manifest of its type with the icons, no installability errors, the page links it', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, context, server }) => {
    const base = server().base;
    const response = await fetch(`${base}/manifest.webmanifest`);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type'), /^application\/manifest\+json\b/);
    const manifest = await response.json();
    assert.equal(manifest.name, 'OpenVaala');
    assert.ok(manifest.short_name && manifest.short_name.length <= 12, manifest.short_name);
    assert.equal(manifest.start_url, '/');
    assert.equal(manifest.scope, '/');
    assert.equal(manifest.display, 'standalone');
    // The colours are the stylesheet's: the header's panel and the page's background (light).
    assert.equal(manifest.theme_color, '#ffffff');
    assert.equal(manifest.background_color, '#f6f7f9');
    const bodyColor = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(bodyColor, 'rgb(246, 247, 249)');
    const headerColor = await page.evaluate(() => getComputedStyle(document.querySelector('#main')).backgroundColor);
    assert.equal(headerColor, 'rgb(255, 255, 255)');

    // Each icon is served, of its type and size; a maskable one and the SVG among them.
    const icons = manifest.icons;
    for (const icon of icons) {
      const answer = await fetch(new URL(icon.src, base).href);
      assert.equal(answer.status, 200, icon.src);
      assert.equal(answer.headers.get('content-type').split(';')[0], icon.type, icon.src);
      const bytes = Buffer.from(await answer.arrayBuffer());
      if (icon.type === 'image/png') assert.equal(pngSize(bytes), icon.sizes, icon.src);
    }
    for (const size of ['192x192', '512x512']) {
      assert.ok(icons.some((icon) => icon.sizes === size && icon.type === 'image/png' && !icon.purpose), size);
      assert.ok(icons.some((icon) => icon.sizes === size && icon.purpose === 'maskable'), `maskable ${size}`);
    }
    assert.ok(icons.some((icon) => icon.src === '/assets/favicon.svg'));

    // The page links the manifest, its theme colours and the icon iOS puts on the home screen.
    assert.equal(await page.getAttribute('link[rel="manifest"]', 'href'), '/manifest.webmanifest');
    const themes = await page.$$eval('meta[name="theme-color"]', (metas) => metas.map((meta) => [meta.media, meta.content]));
    assert.deepEqual(themes, [
      ['(prefers-color-scheme: light)', '#ffffff'],
      ['(prefers-color-scheme: dark)', '#161a20'],
    ]);
    const touchIcon = await page.getAttribute('link[rel="apple-touch-icon"]', 'href');
    assert.equal(pngSize(Buffer.from(await (await fetch(new URL(touchIcon, base).href)).arrayBuffer())), '180x180');

    // Chromium's own view: the manifest parses without errors, and nothing keeps the app from
    // being installed (once its worker controls the page).
    await waitForWorker(page);
    const cdp = await context.newCDPSession(page);
    const read = await cdp.send('Page.getAppManifest');
    assert.equal(read.url, `${base}/manifest.webmanifest`);
    assert.deepEqual(read.errors, []);
    assert.deepEqual(JSON.parse(read.data), manifest);
    assert.deepEqual((await cdp.send('Page.getInstallabilityErrors')).installabilityErrors, []);
    // The check is not empty-handed: a page without the manifest is not installable.
    const other = await context.newPage();
    await other.goto(`${base}/assets/favicon.svg`);
    const otherCdp = await context.newCDPSession(other);
    const otherErrors = (await otherCdp.send('Page.getInstallabilityErrors')).installabilityErrors;
    assert.ok(otherErrors.length > 0, 'a page with no manifest has installability errors');
    await other.close();
  }));

test('the service worker is active, controls the page, and keeps the app files, never an API answer', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, server }) => {
    const base = server().base;
    const script = await fetch(`${base}/sw.js`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type'), /^application\/javascript\b/);
    assert.equal(script.headers.get('cache-control'), 'no-cache');
    const build = JSON.parse(/^const BUILD = (.*);$/m.exec(await script.text())[1]);

    await waitForWorker(page);
    const worker = await page.evaluate(async () => {
      const registration = await navigator.serviceWorker.ready;
      return { scope: registration.scope, state: registration.active.state, controller: navigator.serviceWorker.controller.scriptURL };
    });
    assert.deepEqual(worker, { scope: `${base}/`, state: 'activated', controller: `${base}/sw.js` });

    // Use the UI: a conversation, its reply, the list, a reload.
    const id = await startConversation(page, 'kept offline?');
    await waitForReply(page, 'kept offline?');
    await page.reload();
    await waitIdle(page);
    await page.locator('#conversation-list a.conv-link', { hasText: 'kept offline?' }).waitFor();

    // One cache, this build's, holding the app's files: every one the service listed, and
    // nothing else — no API path, no /metrics, no query (a sign-in link's token).
    const kept = await cachedUrls(page);
    assert.deepEqual(Object.keys(kept), [build.cache]);
    const urls = kept[build.cache].map((url) => new URL(url));
    const paths = urls.map((url) => url.pathname);
    for (const file of build.files) assert.ok(paths.includes(file), `${file} is kept`);
    for (const url of urls) {
      assert.equal(url.origin, base);
      assert.equal(url.search, '', url.href);
      assert.match(url.pathname, /^\/(manifest\.webmanifest|assets\/.+|vendor\/.+)?$/, url.href);
    }
    assert.ok(!paths.some((path) => path.startsWith('/api') || path === '/metrics' || path === '/sw.js'), paths.join(' '));
    // The page's API calls were made (and are not what the cache holds).
    const apiCalls = await page.evaluate(() => performance.getEntriesByType('resource').filter((entry) => new URL(entry.name).pathname.startsWith('/api/')).length);
    assert.ok(apiCalls > 0);
    assert.equal((await (await fetch(`${base}/api/conversations/${encodeURIComponent(id)}`)).json()).id, id);
  }));

test('with the service stopped, the page opens from the cache, says it reconnects, and comes back by itself', { timeout: TEST_TIMEOUT }, () =>
  withUi({ allowConsole: OFFLINE_NOISE }, async ({ page, restartServer }) => {
    await startConversation(page, 'written before the outage');
    await waitForReply(page, 'written before the outage');
    await waitForWorker(page);

    await restartServer(async () => {
      await page.reload();
      // The page, its modules and styles came from the worker's copy: the service is down.
      await page.locator('#main[data-view="blocked"] #blocked h2', { hasText: 'Reconnecting…' }).waitFor();
      await page.locator('#blocked', { hasText: 'opens by itself when the service is back' }).waitFor();
      const list = page.locator('#list-connection', { hasText: 'Reconnecting…' });
      await list.waitFor();
      assert.ok(await list.isVisible());
      await page.locator('#banners .banner.error', { hasText: 'does not answer' }).waitFor();
      assert.match(await page.textContent('#banners .banner.error .banner-text'), /Reconnecting/);
      assert.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), 'rgb(246, 247, 249)');
      // App files answer from the cache; an API request is never answered from it.
      const answers = await page.evaluate(async () => {
        const tryFetch = (path) =>
          fetch(path).then(
            (response) => response.status,
            () => 'failed',
          );
        return { asset: await tryFetch('/assets/main.js'), vendor: await tryFetch('/vendor/marked/marked.esm.js'), health: await tryFetch('/api/health'), list: await tryFetch('/api/conversations') };
      });
      assert.deepEqual(answers, { asset: 200, vendor: 200, health: 'failed', list: 'failed' });
      await screenshot(page, 'offline-reconnecting');
    });

    // Back: the conversation opens by itself, and what said the service was gone goes.
    await waitIdle(page);
    await page.locator('#items .item.user-message .text', { hasText: 'written before the outage' }).waitFor();
    await page.locator('#list-connection').waitFor({ state: 'hidden' });
    await page.locator('#banners .banner.error').waitFor({ state: 'detached' });
    await page.locator('#conversation-list a.conv-link', { hasText: 'written before the outage' }).waitFor();
    assert.equal(await page.textContent('#conversation-title'), 'written before the outage');
  }));

test('on a phone with the device offline, the page opens and says it reconnects; online again, it goes on', { timeout: TEST_TIMEOUT }, () =>
  withUi({ viewport: PHONE_390, hasTouch: true, allowConsole: OFFLINE_NOISE }, async ({ page, context }) => {
    await page.locator('#main[data-view="new"]').waitFor();
    await waitForWorker(page);
    await context.setOffline(true);
    await page.reload();
    await page.locator('#main[data-view="new"] #composer').waitFor();
    // The list (and its status line) is behind the menu on a phone: the banner says it.
    const banner = page.locator('#banners .banner.error', { hasText: 'Reconnecting' });
    await banner.waitFor();
    assert.ok(await banner.isVisible());
    await screenshot(page, 'offline-phone');
    await context.setOffline(false);
    await banner.waitFor({ state: 'detached' });
    await page.locator('#list-connection').waitFor({ state: 'hidden' });
  }));

test('a stale copy never hides what the service serves; a new worker drops the caches of earlier builds', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await page.locator('#main[data-view="new"]').waitFor();
    await waitForWorker(page);
    const name = (await page.evaluate(() => caches.keys()))[0];
    // An earlier build's stylesheet in the cache: the service's answers win, and replace it.
    await page.evaluate(async (cacheName) => {
      const cache = await caches.open(cacheName);
      await cache.put('/assets/app.css', new Response('body { background: rgb(255, 0, 0); }', { headers: { 'content-type': 'text/css' } }));
    }, name);
    await page.reload();
    await page.locator('#main[data-view="new"]').waitFor();
    assert.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), 'rgb(246, 247, 249)');
    await waitInPage(page, async (cacheName) => {
      const kept = await (await caches.open(cacheName)).match('/assets/app.css');
      return kept && (await kept.text()).includes('--bg: #f6f7f9');
    }, name);

    // A worker installed again (as after an upgrade) deletes the caches of other builds, and
    // only its own kind.
    await page.evaluate(async () => {
      await (await caches.open('openvaala-0.0.0-earlier')).put('/assets/old.js', new Response('old'));
      await (await caches.open('not-ours')).put('/x', new Response('x'));
      await navigator.serviceWorker.register('/sw.js?installed-again', { scope: '/' });
    });
    await waitInPage(page, async () => !(await caches.keys()).includes('openvaala-0.0.0-earlier'));
    assert.deepEqual((await page.evaluate(() => caches.keys())).sort(), [name, 'not-ours'].sort());
  }));

test("on a phone (390×844) a waiting approval's answers and the waiting messages are in view above the message box", { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST, viewport: PHONE_390, hasTouch: true }, async ({ page }) => {
    // On a touch screen Return adds a line: the Send button sends.
    await page.locator('#main[data-view="new"] #composer').waitFor();
    await page.fill('#message', 'Look at the project first\n/shell ls -la && cat README.md | head -20');
    await page.click('#send');
    const card = page.locator('#items .approval.asking');
    await card.waitFor();
    for (let n = 1; n <= 3; n++) {
      await page.fill('#message', `waiting message number ${n}\nwith a second line`);
      await page.click('#send');
      await page.locator('#pending-list li.pending-item', { hasText: `number ${n}` }).waitFor();
    }
    await page.fill('#message', '');

    // Each is on the screen and is what a tap at its centre reaches: not scrolled out of its
    // area, not covered.
    const reachable = () =>
      page.evaluate(() => {
        // What is asked, the answers, the first waiting message's buttons, the message box.
        const selectors = ['.approval.asking .approval-subject', '.approval.asking button[data-decision]', '#pending-list li.pending-item:first-child button', '#message', '#send'];
        const found = [];
        for (const node of document.querySelectorAll(selectors.join(', '))) {
          const box = node.getBoundingClientRect();
          const x = box.left + box.width / 2;
          const y = box.top + box.height / 2;
          const hit = document.elementFromPoint(x, y);
          const inView = box.top >= 0 && box.bottom <= window.innerHeight && box.left >= 0 && box.right <= window.innerWidth;
          found.push({ what: node.textContent.trim() || node.id, reached: inView && !!hit && (hit === node || node.contains(hit)) });
        }
        return found;
      });
    // Waiting for the layout to settle: the timeline follows its end as the panel under it grows.
    await page.waitForFunction(() => {
      const deny = document.querySelector('.approval.asking button[data-decision="deny"]');
      const box = deny.getBoundingClientRect();
      return document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2) === deny;
    });
    const found = await reachable();
    assert.deepEqual(
      found.filter((entry) => !entry.reached),
      [],
      JSON.stringify(found),
    );
    for (const answer of ['Allow once', 'Allow in this conversation', 'Always allow', 'Deny']) {
      assert.ok(found.some((entry) => entry.what === answer), answer);
    }
    // The message box stays where it was, at the foot of the screen.
    const composer = await page.locator('#composer').boundingBox();
    assert.ok(Math.abs(composer.y + composer.height - PHONE_390.height) <= 1, JSON.stringify(composer));
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      await screenshot(page, `phone-390-approval-waiting-${scheme}`);
    }
    await card.locator('button[data-decision="deny"]').click();
    await page.locator('#items .approval.settled[data-status="denied"]').waitFor();
  }));
