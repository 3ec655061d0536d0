// Small DOM and formatting helpers shared by every module. Nothing here knows about the API.
//
// `el` is how the UI builds its DOM: strings become text nodes, so data from the API can never
// inject markup. The one place that turns agent text into HTML is markdown.js, through the
// sanitizer.

export const $ = (id) => document.getElementById(id);
export const enc = encodeURIComponent;

// el('div', {class: 'x', onclick: f}, 'text', child, …); `null`, `undefined` and `false`
// children and attributes are left out.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'text') node.textContent = value;
    else if (key in node && key !== 'list' && !key.includes('-')) node[key] = value;
    else node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A fresh Idempotency-Key. randomUUID needs a secure context; getRandomValues does not (the
// service reached by a LAN address).
export function newKey() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function relTime(iso) {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return '';
  const seconds = (Date.now() - then) / 1000;
  if (seconds < 45) return 'just now';
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  if (seconds < 7 * 86400) return `${Math.round(seconds / 86400)} d ago`;
  return new Date(then).toLocaleDateString();
}

// The time of day, with the date in front once it is not today ("Dec 3, 07:37 PM").
export function clockTime(ms) {
  const date = new Date(ms);
  if (Number.isNaN(date.getTime())) return '';
  const time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  if (date.toDateString() === new Date().toDateString()) return time;
  const sameYear = date.getFullYear() === new Date().getFullYear();
  const day = date.toLocaleDateString([], sameYear ? { month: 'short', day: 'numeric' } : { year: 'numeric', month: 'short', day: 'numeric' });
  return `${day}, ${time}`;
}

export function fullTime(ms) {
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? '' : date.toLocaleString([], { dateStyle: 'medium', timeStyle: 'medium' });
}

// 12.3k, 128k, 1.2M: short figures where space is tight.
export function formatTokens(n) {
  if (n === null || n === undefined) return '?';
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 0 : 1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(n >= 1e4 ? 0 : 1)}k`;
  return String(n);
}

// 12,345: exact figures, for tooltips and screen readers.
export function formatCount(n) {
  if (n === null || n === undefined) return '?';
  return Number(n).toLocaleString('en-US');
}

export function plural(n, one, many) {
  return `${formatCount(n)} ${n === 1 ? one : many || `${one}s`}`;
}

// Who answered an approval or made a rule. The service records the kind of client by the
// token it presented (`web`, `cli`, `acp`, `api`, or `service` for its own decisions);
// records from before that hold the client's User-Agent, shown by the browser's name.
const CLIENT_KINDS = {
  web: 'the web UI',
  cli: 'the terminal client',
  acp: 'an editor',
  api: 'an API client',
  service: 'the service',
};

export function clientName(recorded) {
  const ua = String(recorded || '');
  if (Object.hasOwn(CLIENT_KINDS, ua)) return CLIENT_KINDS[ua];
  if (/^Mozilla\//.test(ua)) {
    const browser = /\bEdg\//.test(ua)
      ? 'Edge'
      : /\bFirefox\//.test(ua)
        ? 'Firefox'
        : /Chrome\//.test(ua)
          ? 'Chrome'
          : /\bSafari\//.test(ua)
            ? 'Safari'
            : null;
    if (browser) return browser;
  }
  return ua.length > 60 ? `${ua.slice(0, 60)}…` : ua || 'unknown client';
}

// A directory shortened to about `max` characters, for where space is tight: a long name in
// the middle (an id) keeps its two ends ("c_01…a3f2"), and only the last parts that fit are kept
// ("…/worktrees/c_01…a3f2/work"); a last part longer than that keeps its end. Show the whole path
// beside it (a title).
export function shortPath(path, max = 40) {
  const text = String(path || '');
  if (text.length <= max) return text;
  const parts = text.split('/').filter(Boolean);
  let kept = parts.pop() || '';
  if (kept.length + 2 > max) return `…${kept.slice(-(max - 1))}`;
  while (parts.length) {
    const part = parts[parts.length - 1].length > 14 ? `${parts[parts.length - 1].slice(0, 4)}…${parts[parts.length - 1].slice(-4)}` : parts[parts.length - 1];
    if (part.length + kept.length + 3 > max) break;
    parts.pop();
    kept = `${part}/${kept}`;
  }
  return parts.length ? `…/${kept}` : `/${kept}`;
}

export function formatBytes(n) {
  if (n < 1024) return plural(n, 'byte');
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10240 ? 1 : 0)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function lineCount(text) {
  if (!text) return 0;
  const lines = text.split('\n');
  return lines[lines.length - 1] === '' ? lines.length - 1 : lines.length;
}


// Images as the page shows them: inline ones as <img>, linked ones as links (the page loads
// nothing from elsewhere). `alt` says what they are. Null when there are none.
export function imageList(images, alt) {
  if (!images || !images.length) return null;
  const nodes = images.map((image) =>
    image.data
      ? el('img', { src: `data:${image.media_type};base64,${image.data}`, alt })
      : el('a', { href: image.url, target: '_blank', rel: 'noopener noreferrer' }, image.url),
  );
  return el('div', { class: 'images' }, nodes);
}
