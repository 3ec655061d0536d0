// Approval cards: a tool call that waits for the user's answer gets a card (approvalcard.js
// draws it) with the answers: Allow once, Allow in this conversation and Always allow (both
// keep the rules the card shows), and Deny (with a message for the agent). An escalation is
// never remembered, so it offers Allow once and Deny only, and so does an MCP server's request
// to use the model.
//
// A card sits right after its tool call; one asked by another session than the one shown waits
// under the timeline. Docked (the card's toggle, remembered in this browser), the waiting cards
// sit right above the message box instead, oldest first, and go back to their place once
// settled. From the message box Alt+A allows the oldest waiting card once and Alt+D denies it.
//
// An MCP server's question is a form (Submit, Decline) that takes the focus when it comes, unless
// the user is writing; what the service refuses in an answer is said by the form, which keeps
// what was typed. Alt+A submits it, Alt+D declines.
//
// The first answer of any client wins: when `approval.resolved` comes, or a 409 says another
// answer came first, the card closes to one line with the outcome.

import { api } from './api.js';
import { $, enc } from './dom.js';
import { announce } from './announcer.js';
import { state } from './state.js';
import { approvalText, askedBy, invisibleWarning, outcomeText, pendingCard, settledCard, showDocked } from './approvalcard.js';
import { isQuestion } from './mcpasks.js';
import { forgetAnswer, noteAnswering } from './answered.js';
import { markInvisible } from './visible.js';

const cards = new Map(); // approval id → the card record of approvalcard.js
let wanted = null; // the approval whose card takes the focus once it is shown
const announced = new Set(); // approval ids a screen reader has heard of (a snapshot repeats them)

const REMEMBERING = new Set(['allow_conversation', 'allow_always']);
const DOCK_KEY = 'openvaala.dockApprovals';
// The keys that answer the oldest waiting card from the message box.
const SHORTCUTS = { a: 'allow_once', d: 'deny' };
const SHORTCUT_LABELS = { allow_once: 'Alt+A', deny: 'Alt+D' };

let docked = readDocked();

function readDocked() {
  try {
    return localStorage.getItem(DOCK_KEY) === 'on';
  } catch {
    return false;
  }
}

export function resetApprovalCards() {
  cards.clear();
  $('approvals-elsewhere').replaceChildren();
  $('approvals-dock').replaceChildren();
}

// A pending approval gets its card (once), and a screen reader hears of it (once, also when it
// was asked before the conversation opened); a settled one closes its card (`live`: say so).
export function showApproval(approval, live) {
  if (approval.status !== 'pending') {
    resolveApprovalCard(approval, live);
    return;
  }
  if (cards.has(approval.id)) return;
  const card = pendingCard(approval, {
    answer: (decision) => answer(approval.id, decision),
    toggleDock: () => setDocked(!docked),
    keys: (event) => fieldKeys(event, card),
  });
  cards.set(approval.id, card);
  showDocked(card, docked);
  place(card);
  refreshShortcuts();
  if (wanted === approval.id) focusApproval(approval.id);
  else if (card.fields && shown(card) && !busyWriting()) focusApproval(approval.id);
  if (!announced.has(approval.id)) {
    announced.add(approval.id);
    const warning = invisibleWarning(approval);
    const where = docked ? 'above the message box' : 'in the conversation';
    announce(
      isQuestion(approval)
        ? `${approvalText(approval)}. ${warning ? `${warning} ` : ''}The form to answer it is ${where}.`
        : `${askedBy(approval) || 'The agent'} asks for your approval: ${approvalText(approval)}. ` +
            `${warning ? `${warning} ` : ''}The card with the answers is ${where}.`,
    );
  }
}

// Whether the user is writing something a question's form must not take the focus from: any
// text field but an empty message box, or an open dialog or menu.
function busyWriting() {
  const active = document.activeElement;
  if (document.querySelector('dialog[open], [role="menu"]')) return true;
  if (!active || active === document.body) return false;
  if (active.id === 'message') return active.value !== '';
  return !!active.closest('input, textarea, select, [contenteditable="true"]');
}

function shown(card) {
  return card.node.isConnected && !card.node.hidden && !card.node.closest('[hidden]');
}

// The Agents tab's "Answer": the card's first answer (a question's first field) takes the
// focus, now or once it is shown (the agent's history may still be loading).
export function focusApproval(id) {
  const card = cards.get(id);
  if (!card || !shown(card)) {
    wanted = id;
    return;
  }
  wanted = null;
  card.node.scrollIntoView({ block: 'center' });
  // A question's first field, else the first answer (or, once settled, the outcome).
  const field = card.fields && card.approval.status === 'pending' ? card.fields.first() : null;
  const first = field || card.node.querySelector('button[data-decision], .approval-outcome');
  if (first) first.focus();
}

// The card closes to its outcome, in its place in the timeline. If the focus was in it, it stays
// on the outcome line; a docked card hands it to the next docked card, or the message box.
export function resolveApprovalCard(approval, live) {
  const card = cards.get(approval.id);
  if (!card || card.approval.status !== 'pending') return;
  const wasDocked = card.node.parentNode === $('approvals-dock');
  const hadFocus = card.node.contains(document.activeElement);
  card.approval = approval;
  showSettled(card);
  place(card);
  refreshShortcuts();
  if (hadFocus) focusAfterSettling(card, wasDocked);
  if (live) announce(`${outcomeText(approval, card.sent)}: ${approvalText(approval)}`);
}

function showSettled(card) {
  const node = settledCard(card.approval, card.sent);
  card.node.replaceWith(node);
  card.node = node;
}

function focusAfterSettling(card, wasDocked) {
  if (!wasDocked) {
    card.node.querySelector('.approval-outcome').focus();
    return;
  }
  const next = $('approvals-dock').querySelector('button[data-decision]');
  (next || $('message')).focus();
}

// The timeline drew a tool call: its card, if it has one, goes right after it.
export function placeApprovalCard(itemId) {
  for (const card of cards.values()) if (card.approval.item_id === itemId) place(card);
}

function place(card) {
  const approval = card.approval;
  if (docked && approval.status === 'pending') {
    placeInDock(card);
    return;
  }
  if (approval.session_id !== state.sessionId) {
    if (card.node.parentNode !== $('approvals-elsewhere')) $('approvals-elsewhere').append(card.node);
    return;
  }
  const items = $('items');
  const tool = items.querySelector(`:scope > [data-id="${CSS.escape(approval.item_id)}"]`);
  if (tool) {
    if (tool.nextElementSibling !== card.node) tool.after(card.node);
  } else if (card.node.parentNode !== items) {
    // Its call is not drawn (yet): at the end of the running turn.
    items.append(card.node);
  }
}

// Oldest first, as they were asked.
function placeInDock(card) {
  const dock = $('approvals-dock');
  if (card.node.parentNode === dock) return;
  const later = [...dock.children].find((node) => {
    const other = cards.get(node.dataset.approval);
    return other && other.approval.created_at > card.approval.created_at;
  });
  dock.insertBefore(card.node, later || null);
}

// Docks the waiting cards above the message box, or puts them back after their tool calls. A
// moved node loses the focus: whatever had it gets it back where it now is.
function setDocked(on) {
  docked = on;
  try {
    if (on) localStorage.setItem(DOCK_KEY, 'on');
    else localStorage.removeItem(DOCK_KEY);
  } catch {
    // Not kept: this page still docks until it is reloaded.
  }
  const active = document.activeElement;
  for (const card of cards.values()) {
    if (card.approval.status !== 'pending') continue;
    showDocked(card, on);
    place(card);
  }
  if (active && active.isConnected && document.activeElement !== active) active.focus();
  announce(on ? 'Approval cards are docked above the message box.' : 'Approval cards are back in the conversation, after their tool calls.');
}

function oldestPending() {
  let oldest = null;
  for (const card of cards.values()) {
    if (card.approval.status === 'pending' && (!oldest || card.approval.created_at < oldest.approval.created_at)) oldest = card;
  }
  return oldest;
}

// The shortcuts answer the oldest waiting card: it alone shows their hint and declares them.
function refreshShortcuts() {
  const oldest = oldestPending();
  for (const card of cards.values()) {
    if (card.approval.status !== 'pending') continue;
    card.keys.hidden = card !== oldest;
    for (const [decision, keys] of Object.entries(SHORTCUT_LABELS)) {
      const button = card.node.querySelector(`button[data-decision="${decision}"]`);
      if (card === oldest) button.setAttribute('aria-keyshortcuts', keys);
      else button.removeAttribute('aria-keyshortcuts');
    }
  }
}

// Which answer a key press in the message box gives, if any: Alt and a letter, read from the
// character where it is a plain letter, else from the key's place (Option+A on a Mac types å).
function shortcutDecision(event) {
  if (!event.altKey || event.ctrlKey || event.metaKey || event.shiftKey || event.isComposing) return null;
  const letter = /^[a-z]$/i.test(event.key) ? event.key.toLowerCase() : /^Key[A-Z]$/.test(event.code) ? event.code.slice(3).toLowerCase() : '';
  return SHORTCUTS[letter] || null;
}

// Alt+A and Alt+D in the message box answer the oldest waiting card of the conversation shown;
// without one the keys do what they do anywhere.
export function wireApprovalKeys() {
  $('message').addEventListener('keydown', (event) => {
    const decision = shortcutDecision(event);
    const card = decision && oldestPending();
    if (!card) return;
    event.preventDefault();
    answer(card.approval.id, decision);
  });
}

// Enter in the message denies with it (in a question's field, Enter submits the form). Esc in a
// field first undoes what was typed there (it would otherwise interrupt the turn, which cancels
// the approval).
function fieldKeys(event, card) {
  const field = event.target;
  if (field === card.message && event.key === 'Enter') {
    event.preventDefault();
    answer(card.approval.id, 'deny');
  } else if (event.key === 'Escape') {
    if (field === card.message && field.value) {
      event.preventDefault();
      field.value = '';
    } else if (card.rules && card.rules.owns(field) && card.rules.restore(field)) {
      event.preventDefault();
    } else if (card.fields && card.fields.owns(field) && card.fields.restore(field)) {
      event.preventDefault();
    }
  }
}

// The answer to send, or null when a question's form must be completed first (it says why).
function answerBody(card, decision) {
  const body = { decision };
  if (card.fields) {
    if (decision !== 'allow_once') return body;
    const read = card.fields.read();
    if (read.problem) {
      card.error.replaceChildren(read.problem);
      card.fields.showProblem(read.problem, read.field);
      return null;
    }
    body.content = read.content;
    card.sent = read.content;
    return body;
  }
  if (REMEMBERING.has(decision) && card.rules) {
    const rules = card.rules.chosen();
    if (rules.length) body.rules = rules;
  }
  if (decision === 'deny' && card.message && card.message.value.trim()) body.message = card.message.value.trim();
  return body;
}

async function answer(id, decision) {
  const card = cards.get(id);
  if (!card || card.busy || card.approval.status !== 'pending') return;
  card.error.replaceChildren();
  const body = answerBody(card, decision);
  if (!body) return;
  setBusy(card, true);
  noteAnswering(id, decision);
  try {
    settled(await api('POST', `/api/approvals/${enc(id)}`, body));
  } catch (error) {
    forgetAnswer(id);
    if (error.code === 'already_decided' && error.body && error.body.approval) {
      // Another answer (or the expiry) came first: its outcome is in the answer. The stream
      // may have closed the card already, when it could not yet tell whose answer it was.
      if (card.approval.status === 'pending') settled(error.body.approval);
      else refreshOutcome(card);
    } else {
      card.error.replaceChildren(...markInvisible(error.status === 0 ? 'The service does not answer; try again.' : error.message).nodes);
      // A question's answer that does not fit: the field it names takes the focus.
      if (card.fields && error.status === 400) card.fields.showProblem(error.message);
    }
  } finally {
    setBusy(card, false);
  }
}

// A settled card's line drawn again (who answered is known better now), keeping the focus.
function refreshOutcome(card) {
  const hadFocus = card.node.contains(document.activeElement);
  showSettled(card);
  if (hadFocus) card.node.querySelector('.approval-outcome').focus();
}

// The same path as the stream's `approval.resolved` (conversation.js), which may come later.
function settled(approval) {
  document.dispatchEvent(new CustomEvent('approval-resolved', { detail: approval }));
}

// While an answer is on its way the buttons do nothing; they keep the focus (a disabled button
// would drop it).
function setBusy(card, busy) {
  card.busy = busy;
  if (card.approval.status !== 'pending') return;
  card.node.setAttribute('aria-busy', String(busy));
  for (const button of card.node.querySelectorAll('button[data-decision]')) button.setAttribute('aria-disabled', String(busy));
}
