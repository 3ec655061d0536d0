// Waiting messages: what the user sent while the agent worked, until the agent takes it; until
// then the user may edit it, withdraw it, let the running turn read it now (steer) or interrupt
// the turn with it. After a stop the agent is idle and the messages stay, held: each can then be
// sent now (a turn with it alone) or withdrawn, and a notice by the message box says that the
// held ones go before the next message (the service sends them first, in order), so the next
// message never takes them along unannounced. Two rules keep the user's text safe:
//
// - Editing holds the message back: "Edit" withdraws it from the service (its text comes back)
//   and Save sends the edited text in its place, so the agent can never take the old text while
//   the user rewrites it. A held message survives a reload of the page (sessionStorage).
// - Waiting messages live only in the service's memory: they are not stored. When the stream
//   comes back with a fresh snapshot that no longer holds a waiting message the page knew, and
//   the history does not have it either, the service restarted: its text goes back into the
//   message box, with a notice.

import { api, ApiError } from './api.js';
import { $, el, enc, newKey, plural } from './dom.js';
import { showError, showNotice } from './banners.js';
import { isRunning, state, subAgentName, withNames } from './state.js';
import { insertIntoComposer, sendsOnEnter } from './messagebox.js';
import { longText } from './longtext.js';

const HELD_KEY = 'openvaala.held.';
const WAITING_KEY = 'openvaala.waiting.';

let held = null; // { conversationId, sessionId, mode, original, text, key, fresh }

function store(key, value) {
  if (value === null || (Array.isArray(value) && value.length === 0)) sessionStorage.removeItem(key);
  else sessionStorage.setItem(key, JSON.stringify(value));
}

function load(key) {
  try {
    return JSON.parse(sessionStorage.getItem(key) || 'null');
  } catch {
    return null;
  }
}

// A conversation opens: its held message (from before a reload) comes back.
export function restoreHeld(conversationId) {
  held = load(HELD_KEY + conversationId);
}

function saveHeld() {
  if (held) store(HELD_KEY + held.conversationId, held);
}

function dropHeld() {
  if (held) sessionStorage.removeItem(HELD_KEY + held.conversationId);
  held = null;
}

function viewedSessionId() {
  return state.sessionId || (state.conv && state.conv.root_session_id);
}

function userMessagesOf(pending) {
  const session = viewedSessionId();
  return pending.filter((m) => m.source === 'user' && m.session_id === session);
}

// Whether the session a message waits for has a turn running.
function sessionRunning(sessionId) {
  if (!state.conv) return false;
  if (!sessionId || sessionId === state.conv.root_session_id) return state.conv.status === 'running';
  const session = state.sessions.find((s) => s.id === sessionId);
  return !!session && session.status === 'running';
}

// A sub-agent's report to the agent that started it (not a message "from above").
function isReport(message) {
  if (message.source !== 'agent') return false;
  const sender = state.sessions.find((s) => s.id === message.from_session_id);
  return !sender || sender.parent_id === message.session_id;
}

// The messages held for the session shown: it is idle and they wait, so the next message sent
// to it goes after them (reports from sub-agents are not held this way).
function heldForNext() {
  if (!state.conv || state.view !== 'conversation') return [];
  const session = viewedSessionId();
  if (sessionRunning(session)) return [];
  return state.pending.filter((m) => m.session_id === session && !isReport(m));
}

// ------------------------------------------------------------------------------------------------
// Remembering what waits, to notice what a restart lost.

// The service said what waits now (a live update): that is the truth, nothing was lost.
export function rememberWaiting() {
  if (!state.conv) return;
  store(
    WAITING_KEY + state.conv.id,
    userMessagesOf(state.pending).map((m) => ({ id: m.id, text: m.text })),
  );
}

// Which lost messages a tab has put back (shared by every tab of this browser), and for how
// long that is remembered.
const CLAIM_KEY = 'openvaala.restored.';
const CLAIM_KEPT_MS = 24 * 60 * 60 * 1000;

// How long a tab holds the lock that claims a lost message: the tabs open when the service
// came back look within seconds; a tab opened later finds nothing lost (what waits was
// remembered again meanwhile) or the claim in localStorage.
const CLAIM_HOLD_MS = 60 * 1000;

// Whether this tab got the lock `name`, which no other tab of this browser then gets while
// this one holds it. Unlike localStorage, whose writes reach other tabs' processes a little
// later, a lock is granted to one tab only, at once.
function holdLock(name) {
  return new Promise((resolve) => {
    navigator.locks.request(name, { ifAvailable: true }, (lock) => {
      resolve(lock !== null);
      return lock ? new Promise((release) => setTimeout(release, CLAIM_HOLD_MS)) : undefined;
    });
  });
}

// Claims the messages no other tab has put back yet; forgets old claims.
function claim(messages) {
  const now = Date.now();
  for (let i = localStorage.length - 1; i >= 0; i--) {
    const key = localStorage.key(i);
    if (key && key.startsWith(CLAIM_KEY) && now - Number(localStorage.getItem(key)) > CLAIM_KEPT_MS) localStorage.removeItem(key);
  }
  const mine = messages.filter((m) => localStorage.getItem(CLAIM_KEY + m.id) === null);
  for (const m of mine) localStorage.setItem(CLAIM_KEY + m.id, String(now));
  return mine;
}

// After a snapshot's history is loaded: messages the page knew as waiting that neither wait
// nor are in the history any more were lost with the service's memory. Their text goes back
// into one tab's message box only: the first tab to look claims each (a lock every tab of this
// browser shares, then a note in localStorage for tabs that look later), and the others say
// where it went.
export async function recoverLost(hasItem) {
  if (!state.conv) return;
  const conversationId = state.conv.id;
  const known = load(WAITING_KEY + conversationId) || [];
  const waiting = new Set(state.pending.map((m) => m.id));
  const lost = known.filter((m) => !waiting.has(m.id) && !hasItem(m.id));
  rememberWaiting();
  if (!lost.length) return;
  let mine = lost;
  if (navigator.locks) {
    const held = await Promise.all(lost.map((m) => holdLock(CLAIM_KEY + m.id)));
    mine = lost.filter((_, i) => held[i]);
  }
  mine = claim(mine);
  if (!state.conv || state.conv.id !== conversationId) return;
  if (mine.length) insertIntoComposer(mine.map((m) => m.text).join('\n\n'));
  const elsewhere = lost.length - mine.length;
  const where = !mine.length
    ? `${lost.length === 1 ? 'Its text was' : 'Their text was'} put back in the message box of another tab of this conversation.`
    : elsewhere
      ? `${plural(mine.length, 'text is', 'texts are')} back in the message box, ${plural(elsewhere, 'was', 'were')} put back in another tab.`
      : lost.length === 1
        ? 'Its text is back in the message box.'
        : 'Their text is back in the message box.';
  showNotice(
    [`${plural(lost.length, 'waiting message was', 'waiting messages were')} lost: the service restarted, and waiting messages are kept only in its memory. `, where],
    { key: 'lost-waiting', conversationId, kind: 'warning' },
  );
}

// ------------------------------------------------------------------------------------------------
// Editing: the message is held back while it is edited.

async function startEdit(message) {
  if (held) {
    focusHeld();
    return;
  }
  const conversationId = state.conv.id;
  try {
    const withdrawn = await api('DELETE', `/api/conversations/${enc(conversationId)}/pending/${enc(message.id)}`);
    const text = (withdrawn && withdrawn.text) || message.text;
    held = {
      conversationId,
      sessionId: message.session_id,
      mode: message.mode,
      original: text,
      text,
      key: newKey(),
      fresh: true,
    };
    saveHeld();
    renderPending();
  } catch (error) {
    if (error instanceof ApiError && error.code === 'not_waiting') {
      showError(error, { text: 'The agent took that message before it could be edited; it is in the conversation as it was.' });
    } else {
      showError(error);
    }
  }
}

// ↑ in the empty message box: the last waiting message of the user is edited.
export function editLastWaiting() {
  if (held) {
    focusHeld();
    return true;
  }
  const mine = userMessagesOf(state.pending);
  if (!mine.length) return false;
  startEdit(mine[mine.length - 1]);
  return true;
}

// Sends the held message: the edited text on save, the original on cancel.
async function sendHeld(text) {
  if (!held || held.sending) return;
  const current = held;
  if (!text.trim()) {
    showError(new Error('A message cannot be empty. Withdraw it instead, or write something.'));
    return;
  }
  current.sending = true;
  renderPending();
  const body = { text };
  if (isRunning()) body.mode = current.mode;
  if (current.sessionId && state.conv && current.sessionId !== state.conv.root_session_id) body.session_id = current.sessionId;
  if (text !== current.sentText) {
    current.sentText = text;
    current.key = newKey();
    saveHeld();
  }
  try {
    await api('POST', `/api/conversations/${enc(current.conversationId)}/messages`, body, { 'Idempotency-Key': current.key });
    if (held === current) dropHeld();
  } catch (error) {
    showError(error);
  } finally {
    current.sending = false;
    renderPending();
  }
}

// The held message is withdrawn for good: its text goes into the message box.
function withdrawHeld() {
  if (!held) return;
  const text = held.text;
  dropHeld();
  renderPending();
  insertIntoComposer(text);
}

function focusHeld() {
  const area = $('pending-list').querySelector('textarea');
  if (area) area.focus();
}

async function withdraw(message) {
  try {
    const withdrawn = await api('DELETE', `/api/conversations/${enc(state.conv.id)}/pending/${enc(message.id)}`);
    insertIntoComposer((withdrawn && withdrawn.text) || message.text);
  } catch (error) {
    if (error instanceof ApiError && error.code === 'not_waiting') {
      showError(error, { text: 'The agent already took that message, so it cannot be withdrawn.' });
    } else {
      showError(error);
    }
  }
}

// Send now: with the agent idle, a turn starts with this message alone (the others keep
// waiting); with a turn running, it joins that turn (steer).
async function sendNow(message, button) {
  const hadFocus = !!button && document.activeElement === button;
  if (button) button.disabled = true;
  try {
    await api('POST', `/api/conversations/${enc(state.conv.id)}/pending/${enc(message.id)}/send`);
  } catch (error) {
    if (button) button.disabled = false;
    if (error instanceof ApiError && error.code === 'not_waiting') {
      showError(error, { text: 'The agent already took that message.' });
    } else {
      showError(error);
    }
    return;
  }
  // Its row is gone (or going): the message box is where the user goes on.
  if (hadFocus && (!button.isConnected || document.activeElement === document.body || document.activeElement === button)) $('message').focus();
}

async function patch(message, change) {
  try {
    await api('PATCH', `/api/conversations/${enc(state.conv.id)}/pending/${enc(message.id)}`, change);
  } catch (error) {
    showError(error);
  }
}

// ------------------------------------------------------------------------------------------------

function heldRow() {
  const area = el('textarea', {
    rows: 3,
    value: held.text,
    'aria-label': 'Edit the waiting message',
    disabled: held.sending,
    oninput: (event) => {
      held.text = event.target.value;
      saveHeld();
    },
    onkeydown: (event) => {
      if (sendsOnEnter(event)) {
        event.preventDefault();
        sendHeld(held.text);
      } else if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        sendHeld(held.original);
      }
    },
  });
  return el(
    'li',
    { class: 'pending-item editing' },
    el(
      'div',
      { class: 'pending-head' },
      el('span', { class: `badge mode-${held.mode}` }, held.mode),
      el('span', { class: 'held-note' }, 'Held back while you edit: the agent will not take it until you save.'),
      el('span', { class: 'spacer' }),
      el('button', { type: 'button', class: 'primary', text: 'Save', title: 'Send the edited message (Enter)', disabled: held.sending, onclick: () => sendHeld(held.text) }),
      el('button', { type: 'button', text: 'Cancel', title: 'Put the message back as it was (Esc)', disabled: held.sending, onclick: () => sendHeld(held.original) }),
      el('button', { type: 'button', text: 'Withdraw', title: 'Take it back into the message box', disabled: held.sending, onclick: withdrawHeld }),
    ),
    area,
  );
}

function waitingRow(message) {
  const user = message.source === 'user';
  const target =
    state.conv && message.session_id !== state.conv.root_session_id ? el('span', { class: 'muted' }, `to sub-agent ${subAgentName(message.session_id)}`) : null;
  const head = el(
    'div',
    { class: 'pending-head' },
    el('span', { class: `badge mode-${message.mode}` }, message.mode),
    user ? null : el('span', { class: 'report-from' }, `Report from sub-agent ${subAgentName(message.from_session_id)}`),
    target,
    el('span', { class: 'spacer' }),
  );
  if (user && !sessionRunning(message.session_id)) {
    // The agent is idle (stopped): nothing runs to steer or interrupt; the message is sent now
    // on its own, or taken back.
    head.append(
      el('button', {
        type: 'button',
        class: 'primary send-now',
        text: 'Send now',
        title: 'Start a turn with this message alone; the other waiting messages keep waiting',
        onclick: (event) => sendNow(message, event.currentTarget),
      }),
      el('button', { type: 'button', text: 'Edit', title: 'Hold it back and edit it (↑ in the empty message box)', onclick: () => startEdit(message) }),
      el('button', { type: 'button', text: 'Withdraw', title: 'Take it back into the message box', onclick: () => withdraw(message) }),
    );
  } else if (user) {
    head.append(
      el('button', { type: 'button', text: 'Edit', title: 'Hold it back and edit it (↑ in the empty message box)', onclick: () => startEdit(message) }),
      el('button', { type: 'button', text: 'Withdraw', title: 'Take it back into the message box', onclick: () => withdraw(message) }),
      ...[
        message.mode !== 'steer'
          ? el('button', { type: 'button', text: 'Steer now', title: 'Let the running turn read it before its next model call', onclick: () => patch(message, { mode: 'steer' }) })
          : null,
        message.mode !== 'interrupt'
          ? el('button', { type: 'button', class: 'danger', text: 'Interrupt with this', onclick: () => patch(message, { mode: 'interrupt' }) })
          : null,
      ].filter(Boolean),
    );
  }
  return el('li', { class: `pending-item${user ? '' : ' from-agent'}`, 'data-id': message.id }, head, longText(user ? message.text : withNames(message.text)));
}

// Which sessions the rows were last drawn for as running: a turn that starts or ends changes
// the rows' buttons (Send now while idle; Steer now and Interrupt with this while it runs).
let drawnRunning = '';

function runningKey() {
  if (!state.conv) return '';
  const ids = new Set(state.pending.map((m) => m.session_id));
  return [...ids].map((id) => `${id}:${sessionRunning(id)}`).join(',');
}

// A turn started or ended (conversation.updated, session.updated): the rows follow.
export function noteRunningChanged() {
  if (runningKey() !== drawnRunning) renderPending();
  else renderHeldNotice();
}

export function renderPending() {
  const box = $('pending');
  const inConversation = state.view === 'conversation' && state.conv;
  const pending = inConversation ? state.pending : [];
  const showHeld = inConversation && held && held.conversationId === state.conv.id;
  box.hidden = pending.length === 0 && !showHeld;
  drawnRunning = runningKey();
  const rows = pending.map(waitingRow);
  if (showHeld) rows.unshift(heldRow());
  const list = $('pending-list');
  const focused = list.querySelector('textarea') === document.activeElement;
  const caret = focused ? document.activeElement.selectionStart : null;
  // A focused button keeps the focus when its row is drawn again (a turn started or ended).
  const button = !focused && list.contains(document.activeElement) && document.activeElement.tagName === 'BUTTON' ? document.activeElement : null;
  const buttonRow = button && button.closest('li[data-id]') ? button.closest('li[data-id]').dataset.id : null;
  const buttonText = button ? button.textContent : null;
  list.replaceChildren(...rows);
  $('pending-count').textContent = `(${rows.length})`;
  const idle = pending.some((m) => m.source === 'user' && !sessionRunning(m.session_id));
  box.querySelector('.pending-hint').textContent = idle
    ? 'held since the agent stopped: send each now, or they go before your next message'
    : 'kept in memory until the agent takes them';
  const area = list.querySelector('textarea');
  if (area && (focused || held.fresh)) {
    held.fresh = false;
    area.focus();
    const at = caret === null ? area.value.length : caret;
    area.setSelectionRange(at, at);
  } else if (button) {
    const row = buttonRow ? [...list.children].find((li) => li.dataset.id === buttonRow) : null;
    const again = row ? [...row.querySelectorAll('button')].find((b) => b.textContent === buttonText) || row.querySelector('button') : null;
    if (again) again.focus();
    else $('message').focus();
  }
  renderHeldNotice();
}

// Beside the message box: the held messages go before the next one.
function renderHeldNotice() {
  let notice = $('held-notice');
  const count = heldForNext().length;
  if (!notice) {
    if (!count) return;
    notice = el('p', { id: 'held-notice', class: 'held-notice' });
    $('message').after(notice);
  }
  notice.hidden = !count;
  const text = count
    ? `The agent is stopped: ${plural(count, 'waiting message', 'waiting messages')} will be sent before this one, in order. Send now or Withdraw them above to change that.`
    : '';
  if (notice.textContent !== text) notice.textContent = text;
  const box = $('message');
  const described = (box.getAttribute('aria-describedby') || '').split(' ').filter((id) => id && id !== 'held-notice');
  if (count) described.push('held-notice');
  if (described.length) box.setAttribute('aria-describedby', described.join(' '));
  else box.removeAttribute('aria-describedby');
}
