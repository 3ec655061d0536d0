// The sign-in view: what the page shows instead of the app when the service refuses its
// credential (no session cookie and no kept token, a device signed out or revoked, a kept token
// that is no longer valid). It says how to sign in — `openvaala pair` on the service's machine
// prints a one-time link and its QR code, which the /pair page (pair.js) redeems — and takes a
// pasted token, checked with the service before it is kept in this browser.

import { $ } from './dom.js';
import { apiEvents, checkToken, forgetToken, keepToken } from './api.js';

let shown = false;

// `why`: 'none' (never signed in here), 'refused' (the kept token is not accepted), 'ended' (the
// session was signed out or revoked), 'signed-out' (this page signed it out).
export function showSignIn(why) {
  $('signin-why').textContent = WHY[why] || WHY.none;
  $('signin-kept').hidden = why !== 'refused';
  if (shown) return;
  shown = true;
  // Whatever was open (a dialog, the sidebar on a phone) goes with the app.
  document.querySelectorAll('dialog[open]').forEach((dialog) => dialog.close());
  document.body.classList.remove('sidebar-open');
  document.body.classList.add('signed-out');
  $('app').hidden = true;
  $('signin').hidden = false;
  // A live region only while the view is shown: the app has its own.
  $('signin-error').setAttribute('role', 'alert');
  document.title = 'Sign in — OpenVaala';
  $('signin-title').focus();
}

const WHY = {
  none: 'This browser is not signed in to this OpenVaala service.',
  refused: 'The token this browser kept is not accepted any more: it was revoked, or the service has another one now.',
  ended: 'This browser’s sign-in has ended: it was signed out, here or from another device.',
  'signed-out': 'This browser is signed out. Sign in again to use the service here.',
};

async function useToken(event) {
  event.preventDefault();
  const field = $('signin-token');
  const error = $('signin-error');
  const button = $('signin-use');
  const given = field.value.trim();
  error.textContent = '';
  if (!given) {
    error.textContent = 'Paste a token first.';
    field.focus();
    return;
  }
  button.disabled = true;
  let answer;
  try {
    answer = await checkToken(given);
  } catch (failure) {
    error.textContent = failure.code === 'network' ? 'The service does not answer. Is it running?' : `The service could not check the token (${failure.message}).`;
    button.disabled = false;
    return;
  }
  if (!answer) {
    error.textContent = 'The service does not accept this token. Check that it was copied whole, and that it was not revoked.';
    button.disabled = false;
    field.focus();
    field.select();
    return;
  }
  keepToken(given);
  location.reload();
}

// This page signed its session out: it starts again, empty, at the sign-in view, which says so.
export function signedOut() {
  sessionStorage.setItem(SIGNED_OUT, 'yes');
  location.replace('/');
}

const SIGNED_OUT = 'openvaala.signed-out';

export function wireSignIn() {
  $('signin-form').addEventListener('submit', useToken);
  $('signin-forget').addEventListener('click', () => {
    forgetToken();
    location.reload();
  });
  apiEvents.addEventListener('unauthorized', (event) => {
    const { keptToken, hadSession } = event.detail;
    const signedOutHere = sessionStorage.getItem(SIGNED_OUT) === 'yes';
    sessionStorage.removeItem(SIGNED_OUT);
    showSignIn(keptToken ? 'refused' : signedOutHere ? 'signed-out' : hadSession ? 'ended' : 'none');
  });
}
