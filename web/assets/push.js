// The "Notify me on this device" switch. Turned on, it asks the browser's permission to show
// notifications, then, where the browser can receive pushes (a service worker, the Push API, a
// secure context: HTTPS, or the service's own machine), subscribes this browser to the
// service's pushes — `pushManager.subscribe` with the service's key (`GET /api/push/key`), the
// subscription sent to `POST /api/push/subscriptions` — so a notification comes even while the
// page is closed; the service worker shows it (web/root/sw.js). Where pushes cannot come (plain
// HTTP off the service's machine, a browser without them, a device that may only read), the
// page itself notifies while it is open (attention.js). Turned off, the browser's subscription
// ends and the service forgets it (`DELETE /api/push/subscriptions/{id}`).
//
// Kept in this browser: the setting ('page' or 'push'; 'on', from before pushes, is 'page') and
// the subscription's id and endpoint. At each start a 'push' setting is checked against the
// browser's subscription, which the browser may have renewed or dropped: the service is told of
// the current one again (it answers with the same id for an endpoint it knows).

import { api, isReadOnly } from './api.js';
import { $ } from './dom.js';
import { showError, showNotice } from './banners.js';
import { workerRegistration } from './serviceworker.js';

const SETTING = 'openvaala.notifications';
const SUBSCRIPTION = 'openvaala.push.subscription';
// How long the browser's push service may take to subscribe before the page gives up on it.
const SUBSCRIBE_WAIT_MS = 30_000;
// How long to wait for the service worker at start.
const WORKER_WAIT_MS = 10_000;

// 'off', 'page' (the page notifies while it is open) or 'push' (pushes come to this browser).
export function notificationMode() {
  const setting = localStorage.getItem(SETTING);
  if (!setting || !('Notification' in window) || Notification.permission !== 'granted') return 'off';
  return setting === 'push' ? 'push' : 'page';
}

function keptSubscription() {
  try {
    return JSON.parse(localStorage.getItem(SUBSCRIPTION) || 'null');
  } catch {
    return null;
  }
}

// Why this browser cannot get pushes from here, or null if it can.
async function whyNoPush() {
  if (!window.isSecureContext) return 'pushes need HTTPS (or a browser on the service’s own machine)';
  if (!('serviceWorker' in navigator) || !('PushManager' in window)) return 'this browser cannot receive pushes';
  if (isReadOnly()) return 'this device may only read, and pushes are for devices with full access';
  const registration = await workerRegistration(WORKER_WAIT_MS);
  if (!registration || !registration.pushManager) return 'the page’s service worker is not running';
  let permission;
  try {
    permission = await registration.pushManager.permissionState({ userVisibleOnly: true });
  } catch {
    permission = 'denied';
  }
  if (permission !== 'granted') return 'the browser does not allow pushes for this page';
  return null;
}

// The service's key as the bytes `subscribe` takes (base64url in the answer).
function keyBytes(base64url) {
  const base64 = base64url.replace(/-/g, '+').replace(/_/g, '/');
  const binary = atob(base64 + '='.repeat((4 - (base64.length % 4)) % 4));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function sameKey(buffer, bytes) {
  if (!buffer) return false;
  const given = new Uint8Array(buffer);
  return given.length === bytes.length && given.every((b, i) => b === bytes[i]);
}

function withTimeout(promise, ms, message) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// Subscribes this browser (or keeps its subscription, if made with the service's current key)
// and tells the service; keeps the id the service gives.
async function subscribe() {
  const registration = await workerRegistration(WORKER_WAIT_MS);
  const { public_key: publicKey } = await api('GET', '/api/push/key');
  const key = keyBytes(publicKey);
  let subscription = await registration.pushManager.getSubscription();
  if (subscription && !sameKey(subscription.options && subscription.options.applicationServerKey, key)) {
    await subscription.unsubscribe().catch(() => false);
    subscription = null;
  }
  if (!subscription) {
    subscription = await withTimeout(
      registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key }),
      SUBSCRIBE_WAIT_MS,
      'the browser’s push service did not answer',
    );
  }
  const answer = await api('POST', '/api/push/subscriptions', subscription.toJSON());
  localStorage.setItem(SUBSCRIPTION, JSON.stringify({ id: answer.id, endpoint: subscription.endpoint }));
}

// Ends this browser's subscription, and the service's record of it.
async function unsubscribe() {
  const kept = keptSubscription();
  localStorage.removeItem(SUBSCRIPTION);
  const registration = await workerRegistration(WORKER_WAIT_MS);
  const subscription = registration && registration.pushManager ? await registration.pushManager.getSubscription().catch(() => null) : null;
  if (subscription) await subscription.unsubscribe().catch(() => false);
  if (kept && kept.id) {
    try {
      await api('DELETE', `/api/push/subscriptions/${encodeURIComponent(kept.id)}`);
    } catch (error) {
      // Gone already, or this device may not change anything: the browser's subscription has
      // ended, so the service's next push there fails and it forgets it itself.
      if (error.status !== 404 && error.status !== 403) showError(error);
    }
  }
}

function render(box) {
  const mode = notificationMode();
  box.checked = mode !== 'off';
  box.dataset.mode = mode;
  const note = $('notify-state');
  note.hidden = mode === 'off';
  note.textContent = mode === 'push' ? 'Also while the page is closed.' : 'While this page is open.';
}

async function turnOn(box) {
  let permission = 'Notification' in window ? Notification.permission : 'unsupported';
  if (permission === 'default') permission = await Notification.requestPermission();
  if (permission !== 'granted') {
    showNotice([refusal(permission)], { key: 'notifications' });
    return;
  }
  let why = await whyNoPush();
  if (!why) {
    try {
      await subscribe();
      localStorage.setItem(SETTING, 'push');
      return;
    } catch (error) {
      why = pushFailure(error);
    }
  }
  localStorage.setItem(SETTING, 'page');
  showNotice([`Notifications come while this page is open (in a tab, or as an app), not while it is closed: ${why}.`], { key: 'notifications' });
}

// Why the browser shows no notification, and what to do.
function refusal(permission) {
  // Browsers notify only for pages of a secure origin (HTTPS, or the machine's own address).
  if (!window.isSecureContext) return 'Browsers show notifications only for pages served over HTTPS (or on the service’s own machine); the tab’s title still gets a mark.';
  if (permission === 'unsupported') return 'This browser cannot show notifications here (on an iPhone or iPad: add the app to the home screen, and turn them on there).';
  return 'The browser does not allow this page to show notifications: allow them in its settings for this site, then turn them on again.';
}

function pushFailure(error) {
  if (error && error.status === 404) return 'this service does not send pushes';
  if (error && error.status) return `the service did not take the subscription (${error.message})`;
  return `subscribing failed (${(error && error.message) || error})`;
}

async function turnOff() {
  const wasPush = localStorage.getItem(SETTING) === 'push';
  localStorage.removeItem(SETTING);
  if (wasPush || keptSubscription()) await unsubscribe();
}

// A 'push' setting at start: the service is told of the browser's current subscription (or a
// new one, if the browser dropped it); with the permission withdrawn, the page notifies nothing.
async function keepCurrent(box) {
  if (localStorage.getItem(SETTING) !== 'push') return;
  if (await whyNoPush()) return;
  const registration = await workerRegistration(WORKER_WAIT_MS);
  const subscription = await registration.pushManager.getSubscription().catch(() => null);
  const kept = keptSubscription();
  if (subscription && kept && kept.id && subscription.endpoint === kept.endpoint) return;
  try {
    await subscribe();
  } catch (error) {
    console.warn(`The push subscription could not be renewed: ${error.message}`);
    localStorage.setItem(SETTING, 'page');
  }
  render(box);
}

export function wireNotifySwitch() {
  const box = $('notify');
  render(box);
  box.addEventListener('change', async () => {
    box.disabled = true;
    box.setAttribute('aria-busy', 'true');
    try {
      if (box.checked) await turnOn(box);
      else await turnOff();
    } catch (error) {
      showError(error);
    } finally {
      box.disabled = false;
      box.removeAttribute('aria-busy');
      render(box);
    }
  });
}

// Once the session is known (a device that may only read gets no pushes).
export function followNotifySwitch() {
  const box = $('notify');
  keepCurrent(box).catch((error) => console.warn(`The push subscription could not be checked: ${error.message}`));
}
