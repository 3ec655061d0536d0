// What an approval card shows: while it waits, what the call would do (the command, path or
// arguments, with invisible characters marked and counted, and the working directory), why it
// asks (the setting that decides it on focus and hover), for an escalation why it wants out of
// the sandbox, the rules a remembering answer keeps, and the answers; once settled, one line
// with the outcome and who gave it. approvals.js places the cards and gives the answers.
// An MCP server's question is a form to submit or decline, and its request to use the model
// shows the messages it would send; neither is ever remembered (mcpasks.js draws their parts).

import { clientName, clockTime, el, fullTime, plural } from './dom.js';
import { state, subAgentName } from './state.js';
import { toolTitle } from './toolcards.js';
import { ruleChoices } from './approvalrules.js';
import { answeredHere } from './answered.js';
import { markInvisible, markInvisibleJson, visibleText } from './visible.js';
import { answerSummary, askText, isQuestion, isSampling, questionFields, samplingRows, serverName } from './mcpasks.js';

const hasValue = (value) => value !== undefined && value !== null;

// What the call would do, in one line of plain text (invisible characters written out).
export function subjectText(approval) {
  const subject = approval.subject || {};
  if (hasValue(subject.command)) return `$ ${visibleText(subject.command)}`;
  if (subject.path) return visibleText(subject.path);
  if (hasValue(subject.arguments)) return visibleText(JSON.stringify(subject.arguments));
  return '';
}

// The same, as nodes with the invisible characters marked.
function subjectNodes(approval) {
  const subject = approval.subject || {};
  if (hasValue(subject.command)) return ['$ ', markInvisible(subject.command).nodes];
  if (subject.path) return markInvisible(subject.path).nodes;
  if (hasValue(subject.arguments)) return markInvisibleJson(subject.arguments).nodes;
  return [];
}

// What the approval is about, in one line of plain text: for its card's name and announcements.
export function approvalText(approval) {
  return askText(approval) || `${toolTitle(approval.tool)} ${subjectText(approval)}`;
}

// Who asks, when it is not the main agent.
export function askedBy(approval) {
  if (!state.conv || approval.session_id === state.conv.root_session_id) return null;
  return `Sub-agent ${subAgentName(approval.session_id)}`;
}

// The subject's row of the details: its name, its marked value, and how many it marked.
function subjectRow(subject) {
  if (hasValue(subject.command)) {
    const marked = markInvisible(subject.command);
    return { term: 'Command', value: el('code', { class: 'approval-subject' }, marked.nodes), count: marked.count, what: 'This command contains' };
  }
  if (subject.path) {
    const marked = markInvisible(subject.path);
    return { term: 'Path', value: el('code', { class: 'approval-subject' }, marked.nodes), count: marked.count, what: 'This path contains' };
  }
  if (hasValue(subject.arguments)) {
    const marked = markInvisibleJson(subject.arguments, 2);
    return { term: 'Arguments', value: el('pre', { class: 'approval-subject' }, marked.nodes), count: marked.count, what: 'These arguments contain' };
  }
  return null;
}

// How many invisible characters the subject has, in words; null when none.
export function invisibleWarning(approval) {
  if (isQuestion(approval)) {
    const count = markInvisible((approval.question && approval.question.message) || '').count;
    return count ? `This question contains ${plural(count, 'invisible or control character')}, marked.` : null;
  }
  const row = subjectRow(approval.subject || {});
  if (!row || !row.count) return null;
  return `${row.what} ${plural(row.count, 'invisible or control character')}, marked.`;
}

// Why it asks, in plain words; the setting that decides it shows when the reason has the focus
// (or the pointer, as a tooltip), and a screen reader hears it as the reason's description.
function reasonValue(approval, prefix) {
  if (!approval.setting) return el('span', { class: 'approval-reason' }, approval.reason);
  const settingId = `${prefix}-setting`;
  return [
    el(
      'span',
      { class: 'approval-reason', tabindex: '0', title: `Decided by the setting ${approval.setting}`, 'aria-describedby': settingId },
      approval.reason,
    ),
    el('span', { class: 'approval-setting', id: settingId }, ' · decided by the setting ', el('code', {}, approval.setting)),
  ];
}

function details(approval, prefix) {
  const subject = approval.subject || {};
  const rows = [];
  // A spending limit has no call to show: only why the turn waits.
  if (isBudget(approval)) {
    rows.push(['Why it asks', reasonValue(approval, prefix)]);
    return el('dl', { class: 'approval-details' }, rows.map(([term, value]) => [el('dt', {}, term), el('dd', {}, value)]));
  }
  // A request to use the model: what it would send, not a call's arguments.
  if (isSampling(approval)) {
    rows.push(...samplingRows(approval));
    if (approval.reason) rows.push(['Why it asks', reasonValue(approval, prefix)]);
    return el('dl', { class: 'approval-details' }, rows.map(([term, value]) => [el('dt', {}, term), el('dd', {}, value)]));
  }
  const main = subjectRow(subject);
  if (main) rows.push([main.term, main.value]);
  rows.push(['Directory', el('code', { class: 'approval-cwd' }, markInvisible(subject.cwd || '').nodes)]);
  if (approval.escalate) rows.push(['Outside the sandbox, because', el('span', { class: 'approval-escalate' }, approval.escalate)]);
  rows.push(['Why it asks', reasonValue(approval, prefix)]);
  return el('dl', { class: 'approval-details' }, rows.map(([term, value]) => [el('dt', {}, term), el('dd', {}, value)]));
}

// A spending limit's approval: no tool runs; the turn waits to go past the limit (or stop).
function isBudget(approval) {
  return approval.tool === 'budget';
}

function title(approval) {
  if (isBudget(approval)) return 'Spending limit reached: go on?';
  if (isQuestion(approval)) return `Question from the MCP server ${serverName(approval)}`;
  if (isSampling(approval)) return `Let the MCP server ${serverName(approval)} use the model?`;
  const tool = toolTitle(approval.tool);
  return approval.escalate ? `${tool} outside the sandbox?` : `${tool}: allow this call?`;
}

function head(approval, dockToggle) {
  const asker = askedBy(approval);
  const expires = approval.expires_at ? Date.parse(approval.expires_at) : null;
  return el(
    'div',
    { class: 'approval-head' },
    el('strong', { class: 'approval-title' }, title(approval)),
    asker ? el('span', { class: 'approval-asker' }, `asked by ${asker.charAt(0).toLowerCase()}${asker.slice(1)}`) : null,
    expires
      ? el('span', { class: 'approval-expiry', title: fullTime(expires) }, `${isQuestion(approval) ? 'declined' : 'denied'} at ${clockTime(expires)} unless answered`)
      : null,
    dockToggle,
  );
}

// The button that docks the waiting cards above the message box, or puts them back; it says
// what it will do (approvals.js sets it with `showDocked`).
function dockButton(onToggle) {
  return el('button', { type: 'button', class: 'approval-dock-toggle subtle', onclick: onToggle });
}

export function showDocked(card, docked) {
  card.dockToggle.textContent = docked ? 'Back into the conversation' : 'Dock above the message box';
  card.dockToggle.title = docked
    ? 'Show the cards that wait after their tool calls again'
    : 'Show the cards that wait right above the message box, wherever the conversation is scrolled';
}

// The shortcuts' hint; shown on the card they answer (the oldest that waits).
function keysHint(prefix, approval) {
  const [yes, no] = isQuestion(approval)
    ? [' submits the answers, ', ' declines.']
    : isSampling(approval)
      ? [' allows once, ', ' denies.']
      : [' allows once, ', ' denies (with the message).'];
  return el('p', { class: 'approval-keys', id: `${prefix}-keys`, hidden: true }, 'From the message box: ', el('kbd', {}, 'Alt+A'), yes, el('kbd', {}, 'Alt+D'), no);
}

// Shown instead of the answers on a device that may only read (app.css, `body.read-only`).
function readOnlyNote() {
  return el('p', { class: 'approval-read-only' }, 'This device may only read: answer from a device with full access.');
}

// An MCP server's question: its message and a form; Submit sends the answers, Decline none.
// `card.fields` reads the form (mcpasks.js); the error line sits by the buttons.
function questionCard(approval, handlers) {
  const prefix = `approval-${approval.id}`;
  const errorId = `${prefix}-error`;
  const card = { approval, node: null, busy: false, rules: null, message: null, error: null, keys: keysHint(prefix, approval), dockToggle: dockButton(handlers.toggleDock) };
  card.fields = questionFields(approval, prefix, errorId);
  card.error = el('p', { class: 'approval-error', id: errorId, role: 'alert' });
  const message = (approval.question && approval.question.message) || '';
  const warning = invisibleWarning(approval);
  const form = el(
    'form',
    {
      class: 'question-form',
      novalidate: true,
      'aria-label': 'Your answer',
      onsubmit: (event) => {
        event.preventDefault();
        handlers.answer('allow_once');
      },
    },
    card.fields.node,
    card.error,
    el(
      'div',
      { class: 'approval-row' },
      el('button', { type: 'submit', class: 'primary', 'data-decision': 'allow_once', title: 'Send these answers to the server', text: 'Submit' }),
      el('button', {
        type: 'button',
        class: 'danger',
        'data-decision': 'deny',
        title: 'Answer nothing: the server is told you declined',
        text: 'Decline',
        onclick: () => handlers.answer('deny'),
      }),
    ),
  );
  card.node = el(
    'div',
    {
      class: 'approval asking question',
      role: 'group',
      'aria-label': approvalText(approval),
      'aria-describedby': warning ? `${prefix}-warning` : null,
      'data-approval': approval.id,
      'data-item': approval.item_id,
      'data-status': 'pending',
      onkeydown: (event) => handlers.keys(event),
    },
    head(approval, card.dockToggle),
    warning ? el('p', { class: 'approval-warning', id: `${prefix}-warning` }, el('span', { 'aria-hidden': 'true' }, '⚠ '), warning) : null,
    el('p', { class: 'question-message' }, markInvisible(message).nodes),
    form,
    readOnlyNote(),
    card.keys,
  );
  return card;
}

// A waiting card. `handlers`: { answer(decision), toggleDock(), keys(event) }. Returns the card
// record approvals.js keeps: its node, its rule choices and message field, its error line.
export function pendingCard(approval, handlers) {
  if (isQuestion(approval)) return questionCard(approval, handlers);
  const escalation = !!approval.escalate;
  // A request to use the model is allowed once or denied: nothing is remembered, and no agent
  // reads a message.
  const sampling = isSampling(approval);
  const prefix = `approval-${approval.id}`;
  const card = { approval, node: null, busy: false, rules: null, message: null, error: null, keys: keysHint(prefix, approval), dockToggle: dockButton(handlers.toggleDock) };
  const button = (text, decision, classes, tip) =>
    el('button', { type: 'button', class: classes, 'data-decision': decision, title: tip, text, onclick: () => handlers.answer(decision) });
  const cwd = (approval.subject && approval.subject.cwd) || 'this directory';
  const budget = isBudget(approval);
  const once = budget
    ? button('Go on', 'allow_once', 'primary', 'Let this turn go past the limit to its end; the next turn asks again')
    : sampling
      ? button('Allow once', 'allow_once', 'primary', 'Let the model answer these messages for the server, this once; it asks again next time')
      : button('Allow once', 'allow_once', 'primary', 'Run this call only; the next one like it asks again');
  const stop = button('Stop', 'deny', 'danger', 'End the turn here, as over its budget');
  const refuse = button('Deny', 'deny', 'danger', 'The model does not answer; the server is told');
  const rows = [el('div', { class: 'approval-row' }, once, budget ? stop : null, sampling ? refuse : null)];
  if (!escalation && !budget && !sampling) {
    card.rules = ruleChoices(approval, prefix, cwd);
    rows.push(
      card.rules.node,
      el(
        'div',
        { class: 'approval-row' },
        button('Allow in this conversation', 'allow_conversation', null, 'Run it, and from now on run what the rules match in this conversation without asking'),
        button('Always allow', 'allow_always', null, `Run it, and from now on run what the rules match without asking: this agent in ${cwd}, in every conversation`),
      ),
    );
  }
  if (!budget && !sampling) {
    card.message = el('input', { type: 'text', id: `${prefix}-message`, class: 'approval-message', placeholder: 'optional: why not, told to the agent', autocomplete: 'off' });
    rows.push(el('div', { class: 'approval-row' }, el('label', { for: `${prefix}-message` }, 'Message'), card.message, button('Deny', 'deny', 'danger', 'Do not run it; the agent is told, with the message')));
  }
  card.error = el('p', { class: 'approval-error', role: 'alert' });
  const warning = invisibleWarning(approval);
  card.node = el(
    'div',
    {
      class: `approval asking${escalation ? ' escalation' : ''}`,
      role: 'group',
      'aria-label': sampling ? approvalText(approval) : `Approval needed: ${approvalText(approval)}`,
      'aria-describedby': warning ? `${prefix}-warning` : null,
      'data-approval': approval.id,
      'data-item': approval.item_id,
      'data-status': 'pending',
      onkeydown: (event) => handlers.keys(event),
    },
    head(approval, card.dockToggle),
    warning ? el('p', { class: 'approval-warning', id: `${prefix}-warning` }, el('span', { 'aria-hidden': 'true' }, '⚠ '), warning) : null,
    details(approval, prefix),
    el('div', { class: 'approval-actions' }, rows),
    readOnlyNote(),
    card.keys,
    card.error,
  );
  return card;
}

// Who gave the answer: this browser, or the kind of client the service knows it by.
function answeredBy(approval) {
  const resolution = approval.resolution || {};
  if (answeredHere(approval)) return ' by you (this browser)';
  return resolution.decided_by ? ` by ${clientName(resolution.decided_by)}` : '';
}

// A question's outcome: what was answered, when known (the service keeps the answer; `sent`
// is what this page sent, for a service that does not say).
function questionOutcome(approval, sent) {
  const by = answeredBy(approval);
  switch (approval.status) {
    case 'allowed': {
      const given = (approval.question && approval.question.answer) || (answeredHere(approval) ? sent : null);
      const summary = answerSummary(approval, given);
      return [`Submitted${by}`, summary ? [': ', { quoted: summary }] : []];
    }
    case 'denied':
      return [`Declined${by}`];
    case 'cancelled':
      return ['Cancelled: the turn ended before an answer'];
    case 'expired':
      return ['Expired: nobody answered in time, so it was declined'];
    default:
      return [approval.status];
  }
}

// The outcome as parts: plain words, and `{ quoted }` text from the user or the call, whose
// invisible characters are marked.
function outcomeParts(approval, sent) {
  if (isQuestion(approval)) return questionOutcome(approval, sent);
  const resolution = approval.resolution || {};
  const by = answeredBy(approval);
  const patterns = (resolution.rules && resolution.rules.length ? resolution.rules : resolution.rule ? [resolution.rule] : []).map((rule) => rule.pattern);
  const kept = patterns.length
    ? [` (${patterns.length > 1 ? 'rules' : 'rule'} `, patterns.map((pattern, index) => [index ? ', ' : '', '“', { quoted: pattern }, '”']), ')']
    : [];
  switch (approval.status) {
    case 'allowed':
      if (resolution.decision === 'allow_conversation') return [`Allowed in this conversation${by}`, kept];
      if (resolution.decision === 'allow_always') return [`Always allowed${by}`, kept];
      return [`Allowed once${by}`];
    case 'denied':
      return [`Denied${by}`, resolution.message ? [': “', { quoted: resolution.message }, '”'] : []];
    case 'cancelled':
      return ['Cancelled: the turn ended before an answer'];
    case 'expired':
      return ['Expired: nobody answered in time, so it was denied'];
    default:
      return [approval.status];
  }
}

// The outcome in plain text, for announcements and labels.
export function outcomeText(approval, sent) {
  return outcomeParts(approval, sent)
    .flat(Infinity)
    .map((part) => (typeof part === 'string' ? part : visibleText(part.quoted)))
    .join('');
}

function partNodes(parts) {
  return parts.flat(Infinity).map((part) => (typeof part === 'string' ? part : markInvisible(part.quoted).nodes));
}

// The outcome in bold; a question's answers after it, in plain type.
function outcomeNodes(approval, sent) {
  const parts = outcomeParts(approval, sent);
  if (!isQuestion(approval)) return el('strong', {}, partNodes(parts));
  return [el('strong', {}, partNodes(parts.slice(0, 1))), partNodes(parts.slice(1))];
}

// What a settled card names after its outcome: the call, or what the server asked.
function settledSubject(approval) {
  if (isQuestion(approval)) return el('span', {}, `${serverName(approval)} asked: “`, markInvisible((approval.question && approval.question.message) || '').nodes, '”');
  if (isSampling(approval)) return el('span', {}, `use of the model by the MCP server ${serverName(approval)}`);
  return el('code', {}, subjectNodes(approval));
}

// `sent`: a question's answers this page sent, if any.
export function settledCard(approval, sent) {
  const resolution = approval.resolution || {};
  const when = resolution.decided_at ? fullTime(Date.parse(resolution.decided_at)) : '';
  return el(
    'div',
    {
      class: `approval settled status-${approval.status}${isQuestion(approval) ? ' question' : ''}`,
      role: 'group',
      'aria-label': isQuestion(approval) ? `${approvalText(approval)} ${outcomeText(approval, sent)}` : `Approval: ${outcomeText(approval, sent)}: ${approvalText(approval)}`,
      'data-approval': approval.id,
      'data-item': approval.item_id,
      'data-status': approval.status,
    },
    el(
      'p',
      { class: 'approval-outcome', tabindex: '-1', title: [resolution.decided_by, when].filter(Boolean).join(' · ') },
      outcomeNodes(approval, sent),
      ' · ',
      settledSubject(approval),
    ),
  );
}
