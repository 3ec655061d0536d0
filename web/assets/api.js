// The API client: JSON over fetch, with the service's error shape turned into `ApiError`, and
// the URLs of the SSE streams. Every call reports its outcome on `apiEvents`, so the banners
// can clear an error once the next call succeeds.
//
// Off loopback the service wants a bearer token: it is read once from `?token=` and kept for
// this tab; EventSource cannot send headers, so streams carry it as `access_token=`.

const TOKEN_KEY = 'openvaala.token';
let token = sessionStorage.getItem(TOKEN_KEY);
{
  const url = new URL(location.href);
  if (url.searchParams.has('token')) {
    token = url.searchParams.get('token');
    sessionStorage.setItem(TOKEN_KEY, token);
    url.searchParams.delete('token');
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
  const given = window.prompt('This service needs its access token (OPENVAALA_TOKEN):');
  if (given) {
    sessionStorage.setItem(TOKEN_KEY, given.trim());
    location.reload();
  }
}
