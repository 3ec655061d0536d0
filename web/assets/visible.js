// Text a user approves, shown as what it is: every character that could hide what a command,
// path or argument says, or change how it reads, is written out as a marked token. C0 and C1
// controls (but newline and tab) and DEL read as `\x1b`; bidirectional controls, zero-width and
// other invisible characters as `<U+200B>`: the service's notation for the same characters, so
// every client shows one command the same way. Then `rm victim` followed by an escape sequence
// or a right-to-left override cannot pass for something harmless.

import { el } from './dom.js';

// The invisible characters besides the controls, as [first, last] code points.
const BIDI_CONTROLS = [
  [0x061c, 0x061c],
  [0x200e, 0x200f],
  [0x202a, 0x202e],
  [0x2066, 0x2069],
];
const ZERO_WIDTH = [
  [0x00ad, 0x00ad],
  [0x034f, 0x034f],
  [0x115f, 0x1160],
  [0x17b4, 0x17b5],
  [0x180e, 0x180e],
  [0x200b, 0x200d],
  [0x2060, 0x2064],
  [0x3164, 0x3164],
  [0xfeff, 0xfeff],
  [0xffa0, 0xffa0],
  [0xe0000, 0xe007f],
];

const within = (ranges, code) => ranges.some(([first, last]) => code >= first && code <= last);

function isControl(code) {
  return code <= 0x1f || (code >= 0x7f && code <= 0x9f);
}

// Whether `code` (a code point) is written out. Newline and tab are not: they show as what they are.
function needsEscape(code) {
  if (code === 0x0a || code === 0x09) return false;
  return isControl(code) || within(BIDI_CONTROLS, code) || within(ZERO_WIDTH, code);
}

// How a written-out character reads: `\x1b` below U+0080, `<U+200B>` above.
function notation(code) {
  if (code < 0x80) return `\\x${code.toString(16).padStart(2, '0')}`;
  return `<U+${code.toString(16).toUpperCase().padStart(4, '0')}>`;
}

// What the token's tooltip says the character does.
function explanation(code) {
  if (isControl(code)) return 'A control character: a terminal acts on it instead of showing it';
  if (within(BIDI_CONTROLS, code)) return 'A bidirectional control: it changes the order in which the text around it is shown';
  return 'An invisible character: it takes no space on the screen';
}

function token(code) {
  return el('span', { class: 'invisible-char', title: `${explanation(code)} (${notation(code)})` }, notation(code));
}

// `text` with its invisible characters written out, as plain text: for labels, announcements
// and tooltips, which cannot mark them.
export function visibleText(text) {
  let out = '';
  for (const char of String(text)) {
    const code = char.codePointAt(0);
    out += needsEscape(code) ? notation(code) : char;
  }
  return out;
}

// `text` as nodes, its invisible characters as marked tokens; `count`: how many.
export function markInvisible(text) {
  const nodes = [];
  let plain = '';
  let count = 0;
  for (const char of String(text)) {
    const code = char.codePointAt(0);
    if (!needsEscape(code)) {
      plain += char;
      continue;
    }
    if (plain) nodes.push(plain);
    plain = '';
    nodes.push(token(code));
    count++;
  }
  if (plain) nodes.push(plain);
  return { nodes, count };
}

// JSON's own escapes of controls (`\u001b`, `\r`, `\b`, `\f`), or an escaped backslash, which
// must be passed over so that `\\u001b` (a backslash, then text) is left as it is.
const JSON_ESCAPE = /\\(u[0-9a-fA-F]{4}|.)/g;
const SHORT_CONTROLS = { b: 0x08, f: 0x0c, r: 0x0d };

// The control a JSON escape stands for, or null: `\n` and `\t` stay as JSON writes them.
function escapedControl(escape) {
  if (escape in SHORT_CONTROLS) return SHORT_CONTROLS[escape];
  if (escape[0] !== 'u') return null;
  const code = parseInt(escape.slice(1), 16);
  return code !== 0x0a && code !== 0x09 && code <= 0x1f ? code : null;
}

// `value` as JSON (`indent`: as JSON.stringify's), marked like `markInvisible`: the controls
// JSON escapes are marked in the same notation as the characters it leaves as they are.
export function markInvisibleJson(value, indent) {
  const json = JSON.stringify(value, null, indent);
  const nodes = [];
  let count = 0;
  let from = 0;
  const addPlain = (text) => {
    const marked = markInvisible(text);
    nodes.push(...marked.nodes);
    count += marked.count;
  };
  for (const match of json.matchAll(JSON_ESCAPE)) {
    const code = escapedControl(match[1]);
    if (code === null) continue;
    addPlain(json.slice(from, match.index));
    nodes.push(token(code));
    count++;
    from = match.index + match[0].length;
  }
  addPlain(json.slice(from));
  return { nodes, count };
}
