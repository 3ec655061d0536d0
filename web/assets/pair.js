// The pairing page (/pair): where a link of `openvaala pair` lands. The code is in the link's
// fragment (`#code=…`), which no request sends; it is read, and dropped from the address at
// once. The page suggests a name for this device (its model or system and its browser, as the
// browser tells them), which the person may change, and "Sign in this device" redeems the code
// (`POST /api/pair`): the service answers with a session cookie the page cannot read, and the
// app opens at /. A code works once, within 10 minutes: a used or expired one is said so, with
// what to do.

const $ = (id) => document.getElementById(id);

const TOKEN_KEY = 'openvaala.token';

function takeCode() {
  const match = /(?:^#|&)code=([^&]*)/.exec(location.hash);
  if (location.hash) history.replaceState(null, '', location.pathname);
  return match ? decodeURIComponent(match[1]).trim() : '';
}

// The browser's name, from its brands (Chromium's browsers) or its user agent.
function browserName() {
  const data = navigator.userAgentData;
  if (data && Array.isArray(data.brands)) {
    const names = data.brands.map((brand) => brand.brand).filter((name) => !/not.a.brand|^chromium$/i.test(name));
    const name = names[0] || (data.brands.some((brand) => /^chromium$/i.test(brand.brand)) ? 'Chromium' : '');
    if (name) return name.replace(/^Google /, '').replace(/^Microsoft /, '');
  }
  const ua = navigator.userAgent;
  if (/\bEdg\//.test(ua)) return 'Edge';
  if (/\bFirefox\//.test(ua) || /\bFxiOS\//.test(ua)) return 'Firefox';
  if (/\bCriOS\//.test(ua) || /\bChrome\//.test(ua)) return 'Chrome';
  if (/\bSafari\//.test(ua)) return 'Safari';
  return 'Browser';
}

// The system, from the user agent (a browser's platform hint says the same where it has one).
function systemName() {
  const data = navigator.userAgentData;
  if (data && data.platform) return data.platform;
  const ua = navigator.userAgent;
  if (/iPhone/.test(ua)) return 'iPhone';
  if (/iPad/.test(ua)) return 'iPad';
  if (/Android/.test(ua)) return 'Android';
  if (/CrOS/.test(ua)) return 'ChromeOS';
  if (/Macintosh|Mac OS X/.test(ua)) return 'macOS';
  if (/Windows/.test(ua)) return 'Windows';
  if (/Linux/.test(ua)) return 'Linux';
  return '';
}

function suggest(field) {
  const system = systemName();
  field.value = system ? `${browserName()} on ${system}` : browserName();
  // A phone's model ("Pixel 8") where the browser tells it (Chromium's, in a secure context).
  const data = navigator.userAgentData;
  if (data && data.getHighEntropyValues) {
    const before = field.value;
    data.getHighEntropyValues(['model']).then(
      (values) => {
        if (values.model && field.value === before) field.value = `${browserName()} on ${values.model}`;
      },
      () => {},
    );
  }
}

function fail(text) {
  $('pair-status').textContent = '';
  $('pair-error').replaceChildren(...text);
}

async function pair(code) {
  const name = $('pair-name').value.trim();
  const button = $('pair-submit');
  if (!name) {
    fail(['Give this device a name.']);
    $('pair-name').focus();
    return;
  }
  button.disabled = true;
  $('pair-error').textContent = '';
  $('pair-status').textContent = 'Signing in…';
  let response;
  try {
    response = await fetch('/api/pair', {
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/json' },
      body: JSON.stringify({ code, name }),
    });
  } catch {
    button.disabled = false;
    fail(['The service does not answer. Is it running, and is this the address it serves? Try again.']);
    return;
  }
  if (response.ok) {
    // The cookie signs this browser in from now on: a token kept from before would be sent
    // instead of it.
    localStorage.removeItem(TOKEN_KEY);
    $('pair-status').textContent = 'Signed in. Opening OpenVaala…';
    $('pair-status').classList.add('pair-done');
    location.replace('/');
    return;
  }
  let message = '';
  try {
    const data = await response.json();
    message = (data && data.error && data.error.message) || '';
  } catch {
    message = '';
  }
  if (response.status === 401) {
    $('pair-form').hidden = true;
    fail([
      'This link was used already or has expired: a link works once, within 10 minutes. On the service’s machine run ',
      codeText('openvaala pair'),
      ' again, and open the new link.',
    ]);
    return;
  }
  button.disabled = false;
  if (response.status === 403 && /may only read/.test(message)) {
    fail(['This browser is signed in already, with read-only access, which the service does not let sign in anew. Sign it out from a device with full access (“Devices and tokens”), then open this link again.']);
    return;
  }
  fail([`The service did not sign this device in${message ? `: ${message}` : ` (${response.status})`}.`]);
}

function codeText(text) {
  const node = document.createElement('code');
  node.textContent = text;
  return node;
}

function start() {
  $('pair-host').textContent = location.host;
  const code = takeCode();
  if (!code) {
    fail(['This page signs a device in with a link that ', codeText('openvaala pair'), ' prints on the service’s machine: open that link (or scan its QR code) on this device.']);
    return;
  }
  $('pair-form').hidden = false;
  suggest($('pair-name'));
  $('pair-form').addEventListener('submit', (event) => {
    event.preventDefault();
    pair(code);
  });
  $('pair-submit').focus();
}

start();
