// The web UI's service worker (served at /sw.js, so its scope is the whole UI). It shows the
// service's pushes as notifications and opens the conversation one names when clicked, and it
// keeps the app's own files — the page, /assets/ (the icons among them), /vendor/ and the manifest — so the
// page opens when the service cannot be reached, and touches nothing else: the API, /metrics and
// the event streams go to the network as they are, and no answer of theirs is ever kept.
//
// BUILD, written above by the service, names this build's cache and the files to keep in it. The
// name changes whenever one of the files does, and with it this script, so the browser installs
// the worker again: installing keeps every file, activating deletes the caches of other builds
// and takes over the open pages. An app file is asked of the network first, since the files are
// not content-hashed and a kept copy must never hide an upgrade; each answer replaces the copy.
// The copy answers only when the network fails (the service stopped, the device offline), answers
// with a server error, or takes longer than NETWORK_WAIT_MS.

/* global BUILD */

const PREFIX = 'openvaala-';
// How long an app file may take on the network before the kept copy answers instead (the network's
// answer, when it comes, still replaces the copy).
const NETWORK_WAIT_MS = 4000;

self.addEventListener('install', (event) => {
  event.waitUntil(
    (async () => {
      const cache = await caches.open(BUILD.cache);
      // Revalidated past the HTTP cache: the files of this build, not the ones held from before.
      await cache.addAll(BUILD.files.map((file) => new Request(file, { cache: 'no-cache' })));
      await self.skipWaiting();
    })(),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    (async () => {
      for (const name of await caches.keys()) {
        if (name.startsWith(PREFIX) && name !== BUILD.cache) await caches.delete(name);
      }
      await self.clients.claim();
    })(),
  );
});

self.addEventListener('fetch', (event) => {
  const request = event.request;
  if (request.method !== 'GET' || request.headers.has('range')) return;
  if ((request.headers.get('accept') || '').includes('text/event-stream')) return;
  const url = new URL(request.url);
  // Anything else than an app file is not answered here: the browser asks the network itself.
  if (!isAppFile(url)) return;
  // The page is kept once, whatever its query (a sign-in link's `?token=` is never kept).
  event.respondWith(networkFirst(event, `${url.origin}${url.pathname}`));
});

// The app's own files: the page at /, the manifest, and the two folders of files.
function isAppFile(url) {
  if (url.origin !== self.location.origin) return false;
  const path = url.pathname;
  return path === '/' || path === '/manifest.webmanifest' || path.startsWith('/assets/') || path.startsWith('/vendor/');
}

async function networkFirst(event, key) {
  const network = fetch(event.request);
  event.waitUntil(network.then((response) => keep(key, response)).catch(() => {}));
  let timer;
  const slow = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ slow: true }), NETWORK_WAIT_MS);
  });
  const first = await Promise.race([network.then((response) => ({ response }), (error) => ({ error })), slow]);
  clearTimeout(timer);
  if (first.response && first.response.status < 500) return first.response;
  const kept = await caches.match(key, { cacheName: BUILD.cache, ignoreVary: true });
  if (kept) return kept;
  // No copy: whatever the network gives, when it gives it.
  if (first.response) return first.response;
  return network.catch(() => Response.error());
}

// A complete answer of this origin replaces the kept copy. Cloned at once, before the page reads
// the answer's body.
function keep(key, response) {
  if (response.status !== 200 || response.type !== 'basic') return undefined;
  const copy = response.clone();
  return caches.open(BUILD.cache).then((cache) => cache.put(key, copy));
}

// ------------------------------------------------------------------------------------------------
// Pushes: the service sends `{title, body, url, tag}` to each device that turned "Notify me on
// this device" on (push.js subscribed it). `url` is a path of this origin to open (`/#/c/<id>`);
// `tag` makes a newer notification of the same thing replace the older one. Every push is shown:
// the service sends none to a device that has the app open (an event stream open), and a push
// the browser was not shown counts against the site.

const ICON = '/assets/icons/icon-192.png';

self.addEventListener('push', (event) => {
  event.waitUntil(showPush(readPush(event.data)));
});

function readPush(data) {
  if (!data) return {};
  try {
    const message = data.json();
    return message && typeof message === 'object' ? message : {};
  } catch {
    return { body: data.text() };
  }
}

// A path of this origin, else the app's page: a push never sends the reader elsewhere.
function appUrl(given) {
  try {
    const url = new URL(String(given || '/'), self.location.origin);
    if (url.origin === self.location.origin) return url.href;
  } catch {
    // Not a URL: the app's page.
  }
  return new URL('/', self.location.origin).href;
}

async function showPush(message) {
  const url = appUrl(message.url);
  const options = { body: String(message.body || ''), data: { url }, icon: ICON };
  if (message.tag) options.tag = String(message.tag);
  await self.registration.showNotification(String(message.title || 'OpenVaala'), options);
}

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  event.waitUntil(openFromNotification(data.url));
});

// Opens `path` in a window of the app: one already open (the focused one first) is brought to
// the front and asked to show it, which keeps what it holds (a draft, the scroll); with none
// open, a new window opens there.
async function openFromNotification(path) {
  const url = appUrl(path);
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const apps = windows.filter((client) => new URL(client.url).pathname === '/');
  const open = apps.find((client) => client.focused) || apps[0];
  if (!open) {
    await self.clients.openWindow(url);
    return;
  }
  try {
    await open.focus();
  } catch {
    // Only a click may bring a window to the front; the page is told where to go anyway.
  }
  open.postMessage({ kind: 'open', url });
}
