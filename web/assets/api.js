// The API client: JSON over fetch, with the service's error shape turned into `ApiError`, and
// the URLs of the SSE streams. Every call reports its outcome on `apiEvents`, so the banners
// can clear an error once the next call succeeds.
//
// A request carries one of two credentials. A browser signed in by a pairing link (`openvaala
// pair`, the /pair page) holds a session cookie the page cannot read: the browser sends it by
// itself, on fetches and streams alike, and each state-changing request adds the session's CSRF
// token, which `GET /api/session` gives (asked once at start, `loadSession`). Otherwise the
// page holds a token of the service in localStorage and sends it as a bearer token: the
// sign-in link of `openvaala token url` brings it in the URL's fragment, which no request
// sends, and it is kept for this origin and the fragment forgotten; a token pasted in the
// sign-in view is kept the same way. EventSource cannot send headers, so streams carry a kept
// token as `access_token=`. A kept token wins over the cookie.
//
// A 401 means neither is valid: `apiEvents` gets an 'unauthorized' event and the sign-in view
// (signin.js) takes over. A session whose token may only read (`scope: "read"`) is refused any
// change by the service; such a request fails here at once, without asking.

const TOKEN_KEY = 'openvaala.token';
let token = localStorage.getItem(TOKEN_KEY);
{
  const url = new URL(location.href);
  // `#token=…` (the fragment is otherwise the view's route), or `?token=…`.
  const inFragment = /^#token=([^&]*)$/.exec(url.hash);
  const given = inFragment ? decodeURIComponent(inFragment[1]) : url.searchParams.get('token');
  if (given) {
    token = given;
    localStorage.setItem(TOKEN_KEY, token);
    url.searchParams.delete('token');
    if (inFragment) url.hash = '';
    history.replaceState(null, '', url);
  }
}

// `body`: the whole error answer, for errors that carry more than the message (a 409
// `already_decided` carries the approval's outcome).
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body || null;
  }
}

// 'success' and 'failure' events, with `detail: {method, path}`; 'unauthorized' when the
// service refused the page's credential (`detail: {error, keptToken, hadSession}`).
export const apiEvents = new EventTarget();

// What `GET /api/session` said of this page's credential: { name, scope, via, token_id, label,
// csrf }, or null until it answered.
let session = null;
let sessionLoad = null;

const CHANGES = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);
// The requests a session that may only read still makes: signing itself out.
const ALLOWED_READING = new Set(['DELETE /api/session']);

export async function api(method, path, body, extraHeaders) {
  const changes = CHANGES.has(method);
  if (changes && !token && !session) await loadSession().catch(() => null);
  if (changes && isReadOnly() && !ALLOWED_READING.has(`${method} ${path}`)) {
    apiEvents.dispatchEvent(new CustomEvent('failure', { detail: { method, path } }));
    throw new ApiError(403, 'forbidden', READ_ONLY_MESSAGE);
  }
  let response;
  let csrf;
  try {
    ({ response, csrf } = await send(method, path, body, extraHeaders, changes));
    // A CSRF token from before this browser signed in again (another tab paired it): the
    // session's current one, once.
    if (response.status === 403 && csrf) {
      const before = csrf;
      await loadSession().catch(() => null);
      if (session && session.csrf && session.csrf !== before) ({ response } = await send(method, path, body, extraHeaders, changes));
    }
  } catch (error) {
    apiEvents.dispatchEvent(new CustomEvent('failure', { detail: { method, path } }));
    throw new ApiError(0, 'network', error.message);
  }
  return answer(method, path, response);
}

async function send(method, path, body, extraHeaders, changes) {
  const headers = { accept: 'application/json', ...(extraHeaders || {}) };
  const options = { method, headers };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    options.body = JSON.stringify(body);
  }
  let csrf = null;
  if (token) headers.authorization = `Bearer ${token}`;
  else if (changes && session && session.csrf) csrf = headers['x-csrf-token'] = session.csrf;
  return { response: await fetch(path, options), csrf };
}

async function answer(method, path, response) {
  const text = response.status === 204 ? '' : await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    apiEvents.dispatchEvent(new CustomEvent('failure', { detail: { method, path } }));
    const error = data && data.error;
    const failure = new ApiError(
      response.status,
      (error && error.code) || `http_${response.status}`,
      (error && error.message) || `${response.status} ${response.statusText}`,
      data,
    );
    if (response.status === 401) unauthorized(failure);
    throw failure;
  }
  apiEvents.dispatchEvent(new CustomEvent('success', { detail: { method, path } }));
  return data;
}

export function streamUrl(path) {
  if (!token) return path;
  return `${path}${path.includes('?') ? '&' : '?'}access_token=${encodeURIComponent(token)}`;
}

// ------------------------------------------------------------------------------------------------
// The session: who this page is to the service.

const READ_ONLY_MESSAGE = 'This device may only read (scope `read`): it follows the conversations, and cannot send, answer or change anything.';

// Asks the service who this page's credential is, once at a time; resolves with the session
// (rejects with the ApiError: 401 when there is none, `network` when the service does not
// answer).
export function loadSession() {
  if (!sessionLoad) {
    sessionLoad = api('GET', '/api/session')
      .then((answer) => {
        session = answer;
        return session;
      })
      .finally(() => {
        sessionLoad = null;
      });
  }
  return sessionLoad;
}

export function currentSession() {
  return session;
}

// Whether this page's credential may only read. Unknown until the session answered: then the
// page offers everything, and the service refuses what it must.
export function isReadOnly() {
  return !!session && session.scope === 'read';
}

// A token kept in this browser (from a sign-in link or pasted), rather than a session cookie.
export function hasKeptToken() {
  return !!token;
}

// Keeps `given` as this browser's token (the page then reloads to use it everywhere).
export function keepToken(given) {
  localStorage.setItem(TOKEN_KEY, given);
  token = given;
}

// Forgets the kept token: the cookie, if any, is used from now on.
export function forgetToken() {
  localStorage.removeItem(TOKEN_KEY);
  token = null;
}

// Whether `candidate` is a token the service accepts: its session, or null when refused.
// Neither keeps it nor tells anyone of a refusal.
export async function checkToken(candidate) {
  let response;
  try {
    response = await fetch('/api/session', { headers: { accept: 'application/json', authorization: `Bearer ${candidate}` } });
  } catch (error) {
    throw new ApiError(0, 'network', error.message);
  }
  if (response.status === 401) return null;
  if (!response.ok) throw new ApiError(response.status, `http_${response.status}`, `${response.status} ${response.statusText}`);
  return response.json();
}

// The service refused the credential: the sign-in view takes over (once).
let refused = false;
function unauthorized(error) {
  if (refused) return;
  refused = true;
  const hadSession = !!session;
  session = null;
  apiEvents.dispatchEvent(new CustomEvent('unauthorized', { detail: { error, keptToken: !!token, hadSession } }));
}
