// Agent text as Markdown: parsed by marked, made safe by DOMPurify, code highlighted by
// highlight.js (all vendored under /vendor/). Agent text is untrusted: raw HTML in it is shown
// as text, images become links (the page loads nothing from elsewhere), links open in a new tab
// without a referrer, and everything marked writes goes through the sanitizer.
//
// Streaming text is rendered in pieces so the page stays responsive however long a reply grows.
// A `MarkdownView` cuts its text into groups of blocks at blank lines outside code fences. A
// group that is complete (the text has gone past it) is rendered once, highlighted, and never
// touched again; only the last, growing group is rendered again, at most once per animation
// frame, and all views share one frame budget. The cost: a reference-style link whose definition
// sits in a later group shows as text, and a loose list shows as several lists.

import { Marked } from '/vendor/marked/marked.esm.js';
import DOMPurify from '/vendor/dompurify/purify.es.mjs';
import hljs from '/vendor/highlight.js/highlight.min.js';
import { el } from './dom.js';

// Highlighting is linear but not cheap: a huge block stays plain.
const MAX_HIGHLIGHT_CHARS = 20000;
// A group of blocks with no blank line in it (one long list) is cut before a list item or a
// heading once it is this long, so the growing part stays small.
const LONG_GROUP_CHARS = 4000;
// Rendering work per animation frame, for all views together, and the least time between two
// frames that change the page: text that streams is redrawn about 30 times a second, which reads
// as smooth and leaves the browser most of each frame for the rest of the page.
// A frame also pays the style and layout of what it added, after the budget: at most a few
// finished groups go in per frame (a stream that stalled catches up over a few frames).
const FRAME_BUDGET_MS = 4;
const MAX_GROUPS_PER_FRAME = 4;
const MIN_FRAME_INTERVAL_MS = 32;

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

const markdown = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    // Raw HTML is text to read, never markup to run.
    html({ text, block }) {
      return block ? `<p class="raw-html">${escapeHtml(text)}</p>` : escapeHtml(text);
    },
    // An image would be fetched from wherever the agent says; a link lets the reader decide.
    image({ href, text }) {
      return `<a href="${escapeHtml(href)}">${escapeHtml(text ? `image: ${text}` : href)}</a>`;
    },
  },
});

const SANITIZE = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ['style', 'form', 'button', 'textarea', 'select', 'option', 'img', 'video', 'audio', 'iframe', 'svg', 'math'],
  // No ids or names: agent text must not shadow the page's own elements.
  FORBID_ATTR: ['style', 'id', 'name'],
  ALLOW_DATA_ATTR: false,
};

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

// Markdown text → a sanitized DocumentFragment, with code blocks decorated.
function renderFragment(text, highlight) {
  const fragment = DOMPurify.sanitize(markdown.parse(text), SANITIZE);
  for (const pre of fragment.querySelectorAll('pre')) decorateCode(pre, highlight);
  // A task list's boxes (read-only) say what they show; a box without a name is a control a
  // screen reader cannot tell apart from the next.
  for (const box of fragment.querySelectorAll('input[type="checkbox"]')) {
    box.setAttribute('aria-label', box.checked ? 'done' : 'not done');
  }
  for (const table of fragment.querySelectorAll('table')) {
    const scroller = el('div', { class: 'table-scroll' });
    table.replaceWith(scroller);
    scroller.append(table);
  }
  return fragment;
}

function decorateCode(pre, highlight) {
  const code = pre.querySelector('code');
  if (!code) return;
  const match = /(?:^|\s)language-([\w#+.-]+)/.exec(code.className);
  const language = match ? match[1].toLowerCase() : '';
  const source = code.textContent;
  const shownLanguage = language;
  if (highlight && source.length <= MAX_HIGHLIGHT_CHARS) {
    let result = null;
    // A block that names no language is plain text: guessing coloured logs and prose as
    // some language (a directory listing as C#), which misleads more than it helps.
    if (language && hljs.getLanguage(language)) {
      result = hljs.highlight(source, { language, ignoreIllegals: true });
    }
    if (result) {
      // highlight.js escapes what it is given; its output still goes through the sanitizer,
      // like every HTML string made from agent text.
      code.replaceChildren(DOMPurify.sanitize(result.value, SANITIZE));
      code.classList.add('hljs');
    }
  }
  const block = el(
    'div',
    { class: 'code-block' },
    el('div', { class: 'code-head' }, el('span', { class: 'code-language' }, shownLanguage || 'text'), copyButton(code)),
  );
  // A long line scrolls sideways: the block must be reachable with the keyboard to scroll it.
  pre.tabIndex = 0;
  pre.setAttribute('aria-label', `${shownLanguage || 'text'} code`);
  pre.replaceWith(block);
  block.append(pre);
}

function copyButton(code) {
  return copyTextButton(() => code.textContent, 'Copy the code', 'copy-code');
}

// A Copy button for `text()` (read when clicked). Where there is no clipboard API (an insecure
// origin) the text is copied the old way, through a hidden text box.
export function copyTextButton(text, label, className) {
  const button = el('button', {
    type: 'button',
    class: className,
    text: 'Copy',
    'aria-label': label,
    onclick: async () => {
      let copied = false;
      try {
        await navigator.clipboard.writeText(text());
        copied = true;
      } catch {
        const box = el('textarea', { class: 'copy-buffer', 'aria-hidden': 'true' });
        box.value = text();
        document.body.append(box);
        box.select();
        copied = document.execCommand('copy');
        box.remove();
      }
      button.textContent = copied ? 'Copied' : 'Copy failed';
      setTimeout(() => {
        button.textContent = 'Copy';
      }, 1500);
    },
  });
  return button;
}

// Renders `text` into `node` at once (text that does not stream).
export function renderMarkdown(node, text) {
  const view = new MarkdownView(node);
  view.set(text, true);
  view.renderNow();
  return view;
}

// ------------------------------------------------------------------------------------------------
// One frame loop for every view that has something to render.

const dirty = new Set();
let frame = 0;
let lastFlush = 0;

function schedule(view) {
  dirty.add(view);
  if (!frame) frame = requestAnimationFrame(flush);
}

function flush(now) {
  frame = 0;
  if (now - lastFlush < MIN_FRAME_INTERVAL_MS) {
    frame = requestAnimationFrame(flush);
    return;
  }
  lastFlush = now;
  const budget = { deadline: performance.now() + FRAME_BUDGET_MS, groups: MAX_GROUPS_PER_FRAME };
  for (const view of [...dirty]) {
    if (performance.now() > budget.deadline || budget.groups <= 0) break;
    if (view.step(budget)) dirty.delete(view);
  }
  if (dirty.size) frame = requestAnimationFrame(flush);
}

export class MarkdownView {
  constructor(node) {
    this.node = node;
    this.onDone = null; // called once the final text is on the page
    this.reset();
  }

  reset() {
    this.node.replaceChildren();
    this.text = '';
    this.final = false;
    this.done = false;
    // Offsets where a complete group of blocks ends; `frozen` of them are rendered.
    this.cuts = [];
    this.frozen = 0;
    this.frozenEnd = 0;
    // The line scanner: where the next unread line starts, whether a code fence is open, and
    // whether the last line read was blank.
    this.scanned = 0;
    this.fence = null;
    this.lastBlank = true;
    this.groupStart = 0;
    this.tail = null;
    this.tailText = null;
  }

  // The whole text so far; `final` once it will not change any more.
  set(text, final) {
    if (!text.startsWith(this.text) || (this.done && text !== this.text)) this.reset();
    this.text = text;
    this.final = !!final;
    schedule(this);
  }

  append(delta) {
    if (this.final) return;
    this.text += delta;
    schedule(this);
  }

  renderNow() {
    this.step({ deadline: Infinity, groups: Infinity });
    dirty.delete(this);
  }

  // Renders what the budget allows; true when the view is up to date.
  step(budget) {
    this.scan();
    let worked = false;
    const spent = () => performance.now() > budget.deadline || budget.groups <= 0;
    while (this.frozen < this.cuts.length) {
      if (worked && spent()) return false;
      this.freeze(this.cuts[this.frozen]);
      this.frozen++;
      budget.groups--;
      worked = true;
    }
    if (worked && spent()) return false;
    if (this.final) {
      if (this.frozenEnd < this.text.length) this.freeze(this.text.length);
      if (this.tail) this.tail.remove();
      this.tail = null;
      if (!this.done) {
        this.done = true;
        if (this.onDone) this.onDone();
      }
      return true;
    }
    const rest = this.text.slice(this.frozenEnd);
    if (rest !== this.tailText) {
      if (!this.tail) {
        this.tail = el('div', { class: 'md-group md-growing' });
        this.node.append(this.tail);
      }
      this.tail.replaceChildren(renderFragment(rest, false));
      this.tailText = rest;
    }
    return true;
  }

  freeze(end) {
    const group = el('div', { class: 'md-group' });
    group.append(renderFragment(this.text.slice(this.frozenEnd, end), true));
    if (this.tail) this.node.insertBefore(group, this.tail);
    else this.node.append(group);
    this.frozenEnd = end;
    this.tailText = null;
  }

  // Reads the complete lines not read yet, noting where a new group of blocks may start: at a
  // line that is not indented (not a list item's continuation or indented code), after a blank
  // line, outside a code fence.
  scan() {
    const text = this.text;
    let start = this.scanned;
    for (;;) {
      const end = text.indexOf('\n', start);
      if (end < 0) break;
      this.readLine(text.slice(start, end), start);
      start = end + 1;
    }
    this.scanned = start;
  }

  readLine(line, start) {
    if (this.fence) {
      const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line);
      if (close && close[1][0] === this.fence.char && close[1].length >= this.fence.length) this.fence = null;
      this.lastBlank = false;
      return;
    }
    const blank = line.trim() === '';
    const startsBlock = !blank && start > this.groupStart && !/^[ \t]/.test(line);
    const longGroup = start - this.groupStart > LONG_GROUP_CHARS && /^(?:[-*+] |\d{1,9}[.)] |#{1,6} )/.test(line);
    if (startsBlock && (this.lastBlank || longGroup)) {
      this.cuts.push(start);
      this.groupStart = start;
    }
    const open = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    // A backtick fence's info string may not hold a backtick (that line is inline code).
    if (open && !(open[1][0] === '`' && line.slice(open[0].length).includes('`'))) {
      this.fence = { char: open[1][0], length: open[1].length };
    }
    this.lastBlank = blank;
  }
}
