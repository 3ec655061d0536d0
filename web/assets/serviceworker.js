// Registers the service worker (/sw.js, written from web/root/sw.js) that keeps the app's own
// files, so the page opens at once, also installed as an app, when the service cannot be
// reached, and that shows pushes (push.js subscribes to them). Browsers offer service workers
// only in a secure context (https:, or http:// on localhost and 127.0.0.1); elsewhere the page
// simply works online only. Registered once the page has loaded, so keeping the files never
// slows its first start.
//
// A notification clicked while a window of the app is open asks that window to show what it is
// about (`{kind: 'open', url}`): the page goes there as if the address changed.

import { navigate } from './state.js';

// The worker's registration once it is active, else null.
let active = null;

export function registerServiceWorker() {
  if (!('serviceWorker' in navigator)) return;
  const register = () =>
    navigator.serviceWorker.register('/sw.js', { scope: '/', updateViaCache: 'none' }).catch((error) => {
      // The page works without it, only not offline.
      console.warn(`The service worker could not be registered: ${error.message}`);
    });
  if (document.readyState === 'complete') register();
  else window.addEventListener('load', register, { once: true });
  navigator.serviceWorker.ready.then((registration) => {
    active = registration;
  });
  navigator.serviceWorker.addEventListener('message', (event) => {
    const message = event.data || {};
    if (message.kind === 'open' && typeof message.url === 'string') openUrl(message.url);
  });
}

// The worker's registration, if one is active (for notifications shown through it).
export function activeRegistration() {
  return active;
}

// The worker's registration, waiting up to `ms` for it: null where there is none.
export function workerRegistration(ms) {
  if (!('serviceWorker' in navigator)) return Promise.resolve(null);
  if (active) return Promise.resolve(active);
  return Promise.race([navigator.serviceWorker.ready, new Promise((resolve) => setTimeout(() => resolve(null), ms))]);
}

function openUrl(href) {
  let url;
  try {
    url = new URL(href, location.origin);
  } catch {
    return;
  }
  if (url.origin !== location.origin) return;
  window.focus();
  if (url.pathname === location.pathname) {
    if (url.hash !== location.hash) navigate(url.hash);
  } else {
    location.assign(url.href);
  }
}
