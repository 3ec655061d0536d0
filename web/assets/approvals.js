// Approval cards in the timeline. A tool call that waits for the user's answer shows what it
// would do (the command, path or arguments, and the working directory), why it asks, and for an
// escalation why it wants out of the sandbox; then the answers: Allow once, Allow in this
// conversation and Always allow (both keep the rule in the field), and Deny (with a message for
// the agent). An escalation is never remembered, so it offers Allow once and Deny only.
//
// The first answer of any client wins: when `approval.resolved` comes, or a 409 says another
// answer came first, the card closes to one line with the outcome. A card sits right after its
// tool call; one asked by another session than the one shown waits under the timeline.

import { api } from './api.js';
import { $, clientName, clockTime, el, enc, fullTime } from './dom.js';
import { announce } from './announcer.js';
import { sessionLabel, state } from './state.js';
import { toolTitle } from './toolcards.js';

const cards = new Map(); // approval id → { approval, node, busy, rule, message, error }
let wanted = null; // the approval whose card takes the focus once it is shown
const announced = new Set(); // approval ids a screen reader has heard of (a snapshot repeats them)

const REMEMBERING = new Set(['allow_conversation', 'allow_always']);

export function resetApprovalCards() {
  cards.clear();
  $('approvals-elsewhere').replaceChildren();
}

// A pending approval gets its card (once), and a screen reader hears of it (once, also when it
// was asked before the conversation opened); a settled one closes its card (`live`: say so).
export function showApproval(approval, live) {
  if (approval.status !== 'pending') {
    resolveApprovalCard(approval, live);
    return;
  }
  if (cards.has(approval.id)) return;
  const card = pendingCard(approval);
  cards.set(approval.id, card);
  place(card);
  if (wanted === approval.id) focusApproval(approval.id);
  if (!announced.has(approval.id)) {
    announced.add(approval.id);
    announce(
      `${askedBy(approval) || 'The agent'} asks for your approval: ${toolTitle(approval.tool)} ${subjectText(approval)}. ` +
        'The card with the answers is in the conversation.',
    );
  }
}

// The Agents tab's "Answer": the card's first answer takes the focus, now or once it is shown
// (the agent's history may still be loading).
export function focusApproval(id) {
  const card = cards.get(id);
  if (!card || !card.node.isConnected || card.node.hidden || card.node.closest('[hidden]')) {
    wanted = id;
    return;
  }
  wanted = null;
  card.node.scrollIntoView({ block: 'center' });
  const first = card.node.querySelector('button, .approval-outcome');
  if (first) first.focus();
}

// The card closes to its outcome. If the focus was in it, it stays there, on the outcome line.
export function resolveApprovalCard(approval, live) {
  const card = cards.get(approval.id);
  if (!card || card.approval.status !== 'pending') return;
  card.approval = approval;
  const hadFocus = card.node.contains(document.activeElement);
  const node = settledCard(approval);
  card.node.replaceWith(node);
  card.node = node;
  if (hadFocus) node.querySelector('.approval-outcome').focus();
  if (live) announce(`${outcomeText(approval)}: ${toolTitle(approval.tool)} ${subjectText(approval)}`);
}

// The timeline drew a tool call: its card, if it has one, goes right after it.
export function placeApprovalCard(itemId) {
  for (const card of cards.values()) if (card.approval.item_id === itemId) place(card);
}

function place(card) {
  const approval = card.approval;
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

function subjectText(approval) {
  const subject = approval.subject || {};
  if (subject.command !== undefined && subject.command !== null) return `$ ${subject.command}`;
  if (subject.path) return subject.path;
  if (subject.arguments !== undefined && subject.arguments !== null) return JSON.stringify(subject.arguments);
  return '';
}

// Who asks, when it is not the main agent.
function askedBy(approval) {
  if (!state.conv || approval.session_id === state.conv.root_session_id) return null;
  return `Sub-agent ${sessionLabel(approval.session_id)}`;
}

function details(approval) {
  const subject = approval.subject || {};
  const rows = [];
  if (subject.command !== undefined && subject.command !== null) rows.push(['Command', el('code', { class: 'approval-subject' }, subject.command)]);
  else if (subject.path) rows.push(['Path', el('code', { class: 'approval-subject' }, subject.path)]);
  else if (subject.arguments !== undefined && subject.arguments !== null) {
    rows.push(['Arguments', el('pre', { class: 'approval-subject' }, JSON.stringify(subject.arguments, null, 2))]);
  }
  rows.push(['Directory', el('code', { class: 'approval-cwd' }, subject.cwd)]);
  if (approval.escalate) rows.push(['Outside the sandbox, because', el('span', { class: 'approval-escalate' }, approval.escalate)]);
  rows.push(['Why it asks', el('span', { class: 'approval-reason' }, approval.reason)]);
  return el('dl', { class: 'approval-details' }, rows.map(([term, value]) => [el('dt', {}, term), el('dd', {}, value)]));
}

function pendingCard(approval) {
  const escalation = !!approval.escalate;
  const prefix = `approval-${approval.id}`;
  const card = { approval, node: null, busy: false, rule: null, message: null, error: null };
  const button = (text, decision, classes, title) =>
    el('button', { type: 'button', class: classes, 'data-decision': decision, title, text, onclick: () => answer(approval.id, decision) });
  const cwd = (approval.subject && approval.subject.cwd) || 'this directory';
  const rows = [
    el('div', { class: 'approval-row' }, button('Allow once', 'allow_once', 'primary', 'Run this call only; the next one like it asks again')),
  ];
  if (!escalation) {
    card.rule = el('input', {
      type: 'text',
      id: `${prefix}-rule`,
      class: 'approval-rule',
      value: approval.suggested_rule || '',
      spellcheck: false,
      autocomplete: 'off',
      'aria-describedby': `${prefix}-rule-hint`,
    });
    rows.push(
      el(
        'div',
        { class: 'approval-row' },
        el('label', { for: `${prefix}-rule` }, 'Rule'),
        card.rule,
        button('Allow in this conversation', 'allow_conversation', null, 'Run it, and from now on run what the rule matches in this conversation without asking'),
        button('Always allow', 'allow_always', null, `Run it, and from now on run what the rule matches without asking: this agent in ${cwd}, in every conversation`),
      ),
      el(
        'p',
        { class: 'approval-hint', id: `${prefix}-rule-hint` },
        `Kept by “Allow in this conversation” and “Always allow” (this agent in ${cwd}). `,
        el('code', {}, '*'),
        ' matches any text, ',
        el('code', {}, '?'),
        ' one character.',
      ),
    );
  }
  card.message = el('input', {
    type: 'text',
    id: `${prefix}-message`,
    class: 'approval-message',
    placeholder: 'optional: why not, told to the agent',
    autocomplete: 'off',
  });
  rows.push(
    el(
      'div',
      { class: 'approval-row' },
      el('label', { for: `${prefix}-message` }, 'Message'),
      card.message,
      button('Deny', 'deny', 'danger', 'Do not run it; the agent is told, with the message'),
    ),
  );
  card.error = el('p', { class: 'approval-error', role: 'alert' });
  const asker = askedBy(approval);
  card.node = el(
    'div',
    {
      class: `approval asking${escalation ? ' escalation' : ''}`,
      role: 'group',
      'aria-label': `Approval needed: ${toolTitle(approval.tool)} ${subjectText(approval)}`,
      'data-approval': approval.id,
      'data-item': approval.item_id,
      'data-status': 'pending',
      onkeydown: (event) => fieldKeys(event, card),
    },
    el(
      'div',
      { class: 'approval-head' },
      el('strong', { class: 'approval-title' }, escalation ? `${toolTitle(approval.tool)} outside the sandbox?` : `${toolTitle(approval.tool)}: allow this call?`),
      asker ? el('span', { class: 'approval-asker' }, `asked by ${asker.charAt(0).toLowerCase()}${asker.slice(1)}`) : null,
      approval.expires_at
        ? el('span', { class: 'approval-expiry', title: fullTime(Date.parse(approval.expires_at)) }, `denied at ${clockTime(Date.parse(approval.expires_at))} unless answered`)
        : null,
    ),
    details(approval),
    el('div', { class: 'approval-actions' }, rows),
    card.error,
  );
  return card;
}

// Enter in the message denies with it. Esc in a field first undoes what was typed there (it
// would otherwise interrupt the turn, which cancels the approval).
function fieldKeys(event, card) {
  const field = event.target;
  if (field === card.message && event.key === 'Enter') {
    event.preventDefault();
    answer(card.approval.id, 'deny');
  } else if (event.key === 'Escape' && (field === card.message || field === card.rule)) {
    const original = field === card.rule ? card.approval.suggested_rule || '' : '';
    if (field.value !== original) {
      event.preventDefault();
      field.value = original;
    }
  }
}

async function answer(id, decision) {
  const card = cards.get(id);
  if (!card || card.busy || card.approval.status !== 'pending') return;
  const body = { decision };
  if (REMEMBERING.has(decision) && card.rule && card.rule.value.trim()) body.rule = card.rule.value.trim();
  if (decision === 'deny' && card.message.value.trim()) body.message = card.message.value.trim();
  setBusy(card, true);
  card.error.textContent = '';
  try {
    settled(await api('POST', `/api/approvals/${enc(id)}`, body));
  } catch (error) {
    // Another answer (or the expiry) came first: its outcome is in the answer.
    if (error.code === 'already_decided' && error.body && error.body.approval) settled(error.body.approval);
    else card.error.textContent = error.status === 0 ? 'The service does not answer; try again.' : error.message;
  } finally {
    setBusy(card, false);
  }
}

// The same path as the stream's `approval.resolved` (conversation.js), which may come later.
function settled(approval) {
  document.dispatchEvent(new CustomEvent('approval-resolved', { detail: approval }));
}

// While an answer is on its way the buttons do nothing; they keep the focus (a disabled button
// would drop it).
function setBusy(card, busy) {
  card.busy = busy;
  card.node.setAttribute('aria-busy', String(busy));
  for (const button of card.node.querySelectorAll('button')) button.setAttribute('aria-disabled', String(busy));
}

function outcomeText(approval) {
  const resolution = approval.resolution || {};
  const by = resolution.decided_by ? ` by ${clientName(resolution.decided_by)}` : '';
  const rule = resolution.rule ? ` (rule “${resolution.rule.pattern}”)` : '';
  switch (approval.status) {
    case 'allowed':
      if (resolution.decision === 'allow_conversation') return `Allowed in this conversation${by}${rule}`;
      if (resolution.decision === 'allow_always') return `Always allowed${by}${rule}`;
      return `Allowed once${by}`;
    case 'denied':
      return `Denied${by}${resolution.message ? `: “${resolution.message}”` : ''}`;
    case 'cancelled':
      return 'Cancelled: the turn ended before an answer';
    case 'expired':
      return 'Expired: nobody answered in time, so it was denied';
    default:
      return approval.status;
  }
}

function settledCard(approval) {
  const resolution = approval.resolution || {};
  const when = resolution.decided_at ? fullTime(Date.parse(resolution.decided_at)) : '';
  const text = outcomeText(approval);
  return el(
    'div',
    {
      class: `approval settled status-${approval.status}`,
      role: 'group',
      'aria-label': `Approval: ${text}`,
      'data-approval': approval.id,
      'data-item': approval.item_id,
      'data-status': approval.status,
    },
    el(
      'p',
      { class: 'approval-outcome', tabindex: '-1', title: [resolution.decided_by, when].filter(Boolean).join(' · ') },
      el('strong', {}, text),
      ' · ',
      el('code', {}, subjectText(approval)),
    ),
  );
}
