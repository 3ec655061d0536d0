// The API client: JSON over fetch, with the service's error shape turned into `ApiError`, and
// the URLs of the SSE streams. Every call reports its outcome on `apiEvents`, so the banners
// can clear an error once the next call succeeds.
//
// Every API request carries the service's token. The sign-in link (`openvaala token url`, or
// the one the service prints at a terminal) brings it in the URL's fragment, which no request
// sends; it is kept for this origin and the fragment forgotten. EventSource cannot send
// headers, so streams carry it as `access_token=`.

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

// 'success' and 'failure' events, with `detail: {method, path}`.
export const apiEvents = new EventTarget();

export async function api(method, path, body, extraHeaders) {
  const headers = { accept: 'application/json', ...(extraHeaders || {}) };
  const options = { method, headers };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    options.body = JSON.stringify(body);
  }
  if (token) headers.authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, options);
  } catch (error) {
    apiEvents.dispatchEvent(new CustomEvent('failure', { detail: { method, path } }));
    throw new ApiError(0, 'network', error.message);
  }
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
    if (response.status === 401) askForToken();
    throw new ApiError(
      response.status,
      (error && error.code) || `http_${response.status}`,
      (error && error.message) || `${response.status} ${response.statusText}`,
      data,
    );
  }
  apiEvents.dispatchEvent(new CustomEvent('success', { detail: { method, path } }));
  return data;
}

export function streamUrl(path) {
  if (!token) return path;
  return `${path}${path.includes('?') ? '&' : '?'}access_token=${encodeURIComponent(token)}`;
}

let askedForToken = false;
function askForToken() {
  if (askedForToken) return;
  askedForToken = true;
  const given = window.prompt(
    'This service needs its token. Open the sign-in link it printed, or paste the token ' +
      '(`openvaala token show` prints it):',
  );
  if (given) {
    localStorage.setItem(TOKEN_KEY, given.trim());
    location.reload();
  }
}
