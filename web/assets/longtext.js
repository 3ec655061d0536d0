// A very long message the user wrote (a pasted log, a file) is shown folded: its first lines,
// and a "Show all" button that unfolds it (and "Show less" that folds it again). Laying out
// tens of thousands of characters takes the page's main thread for a while, and a message that
// long is rarely read in the conversation; the whole text is still copied by "Copy".

import { el, formatCount, lineCount, newKey } from './dom.js';

// Past either of these a message is folded to them.
const MAX_LINES = 40;
const MAX_CHARS = 4000;

// The folded part of `text`, or null when it is short enough to show whole.
function foldedPart(text) {
  if (text.length <= MAX_CHARS && lineCount(text) <= MAX_LINES) return null;
  let end = Math.min(text.length, MAX_CHARS);
  let at = -1;
  for (let line = 0; line < MAX_LINES; line++) {
    at = text.indexOf('\n', at + 1);
    if (at === -1 || at >= end) break;
    if (line === MAX_LINES - 1) end = at;
  }
  return text.slice(0, end).replace(/\s+$/, '');
}

// The message's text as a `.text` block, folded when long; `expanded`: shown whole from the
// start (a message drawn again keeps how the user left it). Returns the nodes to append.
export function longText(text, { expanded = false, className = 'text' } = {}) {
  const value = text || '';
  const part = foldedPart(value);
  if (part === null) return [el('div', { class: className }, value)];
  const id = `long-${newKey()}`;
  const body = el('div', { class: `${className} long-text`, id });
  const what = `${formatCount(lineCount(value))} lines, ${formatCount(value.length)} characters`;
  const button = el('button', { type: 'button', class: 'link-button show-all', 'aria-controls': id });
  const show = (whole) => {
    body.replaceChildren(whole ? value : el('span', {}, part), whole ? '' : el('span', { class: 'fold-mark', 'aria-hidden': 'true' }, ' …'));
    body.classList.toggle('folded', !whole);
    body.dataset.expanded = whole ? 'true' : 'false';
    button.setAttribute('aria-expanded', whole ? 'true' : 'false');
    button.textContent = whole ? 'Show less' : `Show all (${what})`;
  };
  button.addEventListener('click', () => {
    const whole = body.dataset.expanded !== 'true';
    show(whole);
    if (!whole) button.scrollIntoView({ block: 'nearest' });
  });
  show(expanded);
  return [body, el('div', { class: 'long-text-bar' }, button)];
}

// Whether the message drawn in `node` (an earlier rendering) was unfolded by the user.
export function wasExpanded(node) {
  const body = node && node.querySelector('.long-text');
  return !!body && body.dataset.expanded === 'true';
}
