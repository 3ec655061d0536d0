// The keyboard shortcuts, listed: `?` (outside a text field) opens a dialog with every key the
// page answers to; Esc or Close closes it and the focus goes back where it was. The list is
// kept here, beside the handlers' modules: main.js (Esc, Ctrl+Shift+O, ?), composer.js and
// messagebox.js (Enter, Shift+Enter, ↑), commands.js (/ and the list's keys), approvals.js
// (Alt+A, Alt+D, and a card's fields), pending.js (the edit's Enter and Esc), sidebar.js (the rows' keys), header.js
// (the tabs'), menu.js (a menu's) and scroll.js (the timeline's).

import { $, el } from './dom.js';
import { isTouch } from './messagebox.js';

const GROUPS = [
  [
    'Anywhere',
    [
      [['?'], 'Show this list of shortcuts (outside a text field)'],
      [['Esc'], 'Interrupt the running turn (closes a menu or a dialog first)'],
      [['Ctrl+Shift+O', '⌘⇧O'], 'Start a new conversation'],
    ],
  ],
  [
    'In the message box',
    [
      [['Enter'], 'Send the message'],
      [['Shift+Enter'], 'Add a line'],
      [['/'], 'At the start: list the commands of the working directory; ↑ and ↓ choose, Enter or Tab completes, Esc closes the list'],
      [['↑'], 'In the empty box: edit the last waiting message (Enter saves the edit, Esc puts it back as it was)'],
      [['Alt+A'], "Allow the oldest approval waiting for an answer, once (an MCP server's question: submit the form)"],
      [['Alt+D'], 'Deny it (a question: decline it)'],
    ],
  ],
  [
    'An approval card',
    [
      [['Enter'], "In its message field: deny, telling the agent that message; in a question's field: submit the form"],
      [['Esc'], 'In a field: undo what was typed there (else Esc interrupts the turn, which cancels the approval)'],
    ],
  ],
  [
    'The conversation history',
    [
      [['Page Up', 'Page Down'], 'Scroll the history when it has the focus (Tab to it)'],
      [['Home', 'End'], 'Go to its beginning or its end'],
    ],
  ],
  [
    'The conversation list',
    [
      [['↑', '↓', 'Home', 'End'], 'Move between conversations'],
      [['Shift+F10'], "Open the conversation's actions (also the context-menu key)"],
      [['F2'], 'Rename the conversation'],
    ],
  ],
  [
    'Tabs and menus',
    [
      [['←', '→', 'Home', 'End'], 'Move between the Conversation and Agents tabs'],
      [['↑', '↓', 'Home', 'End'], 'Move in an open menu; Esc closes it'],
    ],
  ],
];

let open = null;

function inTextField(target) {
  if (!target || !target.closest) return false;
  if (target.isContentEditable) return true;
  const field = target.closest('textarea, select, input');
  return !!field && !['checkbox', 'radio', 'button', 'submit', 'reset'].includes(field.type);
}

function keys(list) {
  const nodes = [];
  list.forEach((key, index) => {
    if (index) nodes.push(' ');
    nodes.push(el('kbd', {}, key));
  });
  return nodes;
}

export function showShortcuts() {
  if (open) return;
  const back = document.activeElement;
  const close = el('button', { type: 'button', text: 'Close', onclick: () => dialog.close() });
  const sections = GROUPS.map(([title, rows]) =>
    el(
      'section',
      { class: 'keys-group' },
      el('h3', {}, title),
      el('dl', {}, rows.map(([combo, what]) => [el('dt', {}, keys(combo)), el('dd', {}, what)])),
    ),
  );
  const dialog = el(
    'dialog',
    { class: 'files-dialog keys-dialog', 'aria-labelledby': 'keys-title' },
    el('h2', { id: 'keys-title' }, 'Keyboard shortcuts'),
    isTouch() ? el('p', { class: 'muted' }, 'On a touch screen Return adds a line and the Send button sends.') : null,
    sections,
    el('div', { class: 'dialog-actions' }, close),
  );
  dialog.addEventListener('close', () => {
    dialog.remove();
    open = null;
    if (back && back.isConnected && back !== document.body) back.focus();
  });
  open = dialog;
  document.body.append(dialog);
  dialog.showModal();
  close.focus();
}

export function wireShortcutHelp() {
  document.addEventListener('keydown', (event) => {
    if (event.key !== '?' || event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    if (inTextField(event.target) || document.querySelector('dialog[open]')) return;
    event.preventDefault();
    showShortcuts();
  });
}

// The history can be scrolled from the keyboard: it is a Tab stop, and Page Up, Page Down,
// Home and End scroll it while it has the focus.
export function makeTimelineFocusable() {
  const timeline = $('timeline');
  timeline.tabIndex = 0;
  timeline.setAttribute('aria-label', 'Conversation history');
}
