// The "Devices and tokens" view (#/devices): who this browser is to the service (its session,
// with a Sign out), and the browsers signed in by a pairing link and the named tokens
// (`GET /api/tokens`), each with its kind, scope, when it was made and last used, and a button
// that signs it out or revokes it at once. Listing and revoking need full access: a device
// that may only read sees its own session and why the list is not shown.

import { api, currentSession, forgetToken, hasKeptToken, isReadOnly, loadSession } from './api.js';
import { $, el, enc, fullTime, plural, relTime } from './dom.js';
import { showError } from './banners.js';
import { isUnreachable, whenBack } from './reconnect.js';
import { announce } from './announcer.js';
import { state } from './state.js';
import { render } from './view.js';
import { signedOut } from './signin.js';

let tokens = [];
let loads = 0;

export function openDevices() {
  state.view = 'devices';
  render();
  renderThisDevice();
  loadDevices();
}

// What this browser is signed in as, and how it signs out.
function renderThisDevice() {
  const session = currentSession();
  const line = $('this-device');
  const actions = $('this-device-actions');
  if (!session) {
    line.textContent = 'Asking the service who this browser is…';
    actions.replaceChildren();
    loadSession().then(
      () => state.view === 'devices' && renderThisDevice(),
      (error) => {
        if (state.view !== 'devices') return;
        line.textContent = 'The service could not say who this browser is.';
        if (isUnreachable(error)) whenBack('this-device', () => state.view === 'devices' && renderThisDevice());
      },
    );
    return;
  }
  const access = scopeText(session.scope);
  if (session.via === 'cookie') {
    line.replaceChildren('Signed in as the device ', el('strong', {}, `“${session.name}”`), ` with ${access}, by a sign-in link.`);
    actions.replaceChildren(el('button', { type: 'button', id: 'sign-out', class: 'danger', text: 'Sign out', title: 'Sign this browser out: its sign-in ends here and now', onclick: signOut }));
    return;
  }
  const which = session.token_id ? ['the token ', el('strong', {}, `“${session.name}”`)] : ['the service’s own token'];
  line.replaceChildren('This browser uses ', ...which, ` with ${access}, kept in this browser.`);
  actions.replaceChildren(
    hasKeptToken()
      ? el('button', { type: 'button', id: 'forget-token', text: 'Forget the token', title: 'Remove the token from this browser; it stays valid elsewhere', onclick: forgetKeptToken })
      : null,
  );
}

function scopeText(scope) {
  return scope === 'read' ? 'read-only access' : 'full access';
}

async function loadDevices() {
  const load = ++loads;
  const view = $('devices-view');
  view.dataset.state = 'loading';
  if (!tokens.length) $('devices-status').textContent = 'Loading the devices and tokens…';
  if (isReadOnly()) {
    tokens = [];
    $('devices-list').hidden = true;
    $('devices-status').textContent = 'This device may only read: the list of devices and tokens, and signing them out, need a device with full access.';
    view.dataset.state = 'loaded';
    return;
  }
  let answer;
  try {
    answer = await api('GET', '/api/tokens');
  } catch (error) {
    if (load !== loads) return;
    view.dataset.state = 'failed';
    if (error.status === 403) {
      $('devices-list').hidden = true;
      $('devices-status').textContent = 'This device may only read: the list of devices and tokens, and signing them out, need a device with full access.';
      return;
    }
    $('devices-status').textContent = 'The devices and tokens could not be read.';
    if (error.status !== 401) showError(error);
    if (isUnreachable(error)) whenBack('devices', () => state.view === 'devices' && loadDevices());
    return;
  }
  if (load !== loads) return;
  tokens = answer.tokens || [];
  renderDevices();
  view.dataset.state = 'loaded';
}

function renderDevices() {
  const devices = tokens.filter((t) => t.kind === 'device').length;
  const named = tokens.length - devices;
  $('devices-list').hidden = tokens.length === 0;
  $('devices-status').textContent = tokens.length
    ? `${plural(devices, 'device')} and ${plural(named, 'token')}, oldest first.`
    : 'No device is signed in by a link, and no named token was made: only the service’s own token is in use.';
  $('devices-list').replaceChildren(...tokens.map(deviceRow));
}

function deviceRow(token) {
  const device = token.kind === 'device';
  const current = !!token.current;
  const label = device ? 'Sign out' : 'Revoke';
  const button = el('button', {
    type: 'button',
    class: 'danger',
    text: label,
    title: device ? 'Sign this device out: its sign-in ends at once' : 'Revoke this token: its requests are refused from now on',
    'aria-label': `${label} ${device ? 'the device' : 'the token'} “${token.name}”${current ? ' (this browser)' : ''}`,
    onclick: () => revoke(token, button),
  });
  const used = token.last_used_at
    ? el('time', { datetime: token.last_used_at, title: fullTime(Date.parse(token.last_used_at)) }, `last used ${relTime(token.last_used_at)}`)
    : el('span', {}, 'never used');
  return el(
    'li',
    { class: `device-row${current ? ' current' : ''}`, 'data-token': token.id, 'data-kind': token.kind },
    el(
      'div',
      { class: 'device-main' },
      el(
        'div',
        { class: 'device-name-line' },
        el('strong', { class: 'device-name' }, token.name),
        current ? el('span', { class: 'badge this-device-badge' }, 'this browser') : null,
      ),
      el(
        'div',
        { class: 'device-meta' },
        el('span', { class: 'device-kind' }, device ? 'Device' : 'Token'),
        el('span', { class: `device-scope scope-${token.scope}` }, token.scope === 'read' ? 'read only' : 'full access'),
        el('time', { datetime: token.created_at, title: fullTime(Date.parse(token.created_at)) }, `${device ? 'signed in' : 'made'} ${relTime(token.created_at)}`),
        used,
      ),
    ),
    el('div', { class: 'device-actions' }, button),
  );
}

// Signed out or revoked (or already gone): the row goes, and the focus moves to the next row's
// button. This browser's own token: the sign-in view follows.
async function revoke(token, button) {
  const session = currentSession();
  const own = token.current || (session && session.token_id === token.id);
  button.disabled = true;
  try {
    if (own && session && session.via === 'cookie') await api('DELETE', '/api/session');
    else await api('DELETE', `/api/tokens/${enc(token.id)}`);
  } catch (error) {
    button.disabled = false;
    if (error.status !== 404) {
      showError(error);
      return;
    }
  }
  if (own) {
    if (hasKeptToken()) forgetToken();
    signedOut();
    return;
  }
  const index = tokens.findIndex((t) => t.id === token.id);
  const hadFocus = document.activeElement === button;
  tokens = tokens.filter((t) => t.id !== token.id);
  renderDevices();
  announce(token.kind === 'device' ? `The device “${token.name}” is signed out.` : `The token “${token.name}” is revoked.`);
  if (hadFocus) {
    const buttons = $('devices-list').querySelectorAll('button');
    const next = buttons[Math.min(index, buttons.length - 1)];
    (next || $('devices-link')).focus();
  }
}

async function signOut(event) {
  const button = event.currentTarget;
  button.disabled = true;
  try {
    await api('DELETE', '/api/session');
  } catch (error) {
    button.disabled = false;
    // Already signed out elsewhere: the sign-in view has taken over.
    if (error.status !== 401) showError(error);
    return;
  }
  signedOut();
}

function forgetKeptToken() {
  forgetToken();
  // Without the token the page starts again: signed in by a cookie, if this browser has one,
  // else at the sign-in view.
  location.reload();
}
