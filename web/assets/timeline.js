// The timeline of the session shown: its items in order (messages as Markdown, tool calls as
// cards, plans as checklists) and the end of a turn that failed or was interrupted (with Retry). The status lines
// under the items are statuslines.js's, the scrolling scroll.js's.
//
// Shown times never go backwards down the page: a message sent while the agent worked joins the
// timeline later than it was written, so it shows when it joined (its sending time is in the
// tooltip).

import { $, clockTime, el, fullTime, imageList } from './dom.js';
import { state, subAgentName, withNames } from './state.js';
import { MarkdownView, copyTextButton, renderMarkdown } from './markdown.js';
import { appendToolOutput, renderToolCall, showOutputEnd } from './toolcards.js';
import { hookRuns } from './hookruns.js';
import { announce } from './announcer.js';
import { retryTurn, rewind } from './actions.js';
import { forgetFileContents, knownContent, noteFileContent } from './filecontents.js';
import { clearStatusLines } from './statuslines.js';
import { resetScroll } from './scroll.js';
import { placeApprovalCard, resetApprovalCards } from './approvals.js';
import { changedPaths, turnFilesBlock } from './filechanges.js';
import { notePlan, planContent, resetPlan } from './plan.js';
import { longText, wasExpanded } from './longtext.js';

const entries = new Map(); // item id → { item, node, view, shownMs }
const turnEnds = new Map(); // turn id → the block that says how a turn ended
const turnFiles = new Map(); // turn id → its "N files changed" block
let lastShownMs = 0; // the shown time of the last item

export function resetTimeline() {
  entries.clear();
  turnEnds.clear();
  turnFiles.clear();
  forgetFileContents();
  lastShownMs = 0;
  clearStatusLines();
  $('items').replaceChildren();
  resetApprovalCards();
  resetScroll();
  resetPlan();
}

export function hasItem(id) {
  return entries.has(id);
}

// The items shown, in no particular order.
export function shownItems() {
  return [...entries.values()].map((entry) => entry.item);
}

function itemsOfTurn(turnId) {
  return [...entries.values()].filter((entry) => entry.item.turn_id === turnId).map((entry) => entry.item);
}

export function showPlaceholder(text) {
  $('items').replaceChildren(el('p', { class: 'loading' }, text));
}

// ------------------------------------------------------------------------------------------------
// Items.

// `live`: the item arrived on the stream now (a finished agent message is announced).
export function upsertItem(item, live) {
  const container = $('items');
  const placeholder = container.querySelector('.loading');
  if (placeholder) placeholder.remove();
  noteFileContent(item);
  notePlan(item);
  const existing = entries.get(item.id);
  if (existing) {
    const wasRunning = existing.item.status === 'running';
    existing.item = item;
    if (existing.view) {
      // An agent message keeps its node: only its head changes, and its text is completed.
      existing.node.className = itemClasses(item);
      existing.node.querySelector('.item-head').replaceWith(itemHead(item, existing.shownMs));
      existing.view.set(item.text || '', item.status !== 'running');
      if (live && wasRunning && item.status === 'completed') {
        existing.view.onDone = () => announce(`Agent: ${existing.node.querySelector('.md').textContent}`);
      }
    } else {
      const node = renderItem(item, existing.shownMs, existing.node);
      existing.node.replaceWith(node);
      existing.node = node;
      if (item.kind === 'tool_call') showOutputEnd(node);
    }
    if (item.files) showTurnFiles(item.turn_id);
    return;
  }
  // Items arrive in order; an older one (a late completion) goes before the first newer one.
  let next = null;
  for (const entry of entries.values()) {
    if (entry.item.session_id === item.session_id && entry.item.seq > item.seq && (!next || entry.item.seq < next.item.seq)) {
      next = entry;
    }
  }
  const entry = { item, node: null, view: null, shownMs: 0 };
  entry.shownMs = next ? Date.parse(item.created_at) || 0 : shownTime(item);
  entry.node = renderItem(item, entry.shownMs, null, entry);
  if (next) container.insertBefore(entry.node, next.node);
  else {
    const lastEnd = [...turnEnds.values()].find((block) => block.dataset.turn === item.turn_id);
    container.append(entry.node);
    // A turn's end block stays after the turn's items.
    if (lastEnd) container.append(lastEnd);
  }
  entries.set(item.id, entry);
  if (item.kind === 'tool_call') placeApprovalCard(item.id);
  if (next) refreshTimes();
  if (item.kind === 'tool_call') showOutputEnd(entry.node);
  if (item.files || turnFiles.has(item.turn_id)) showTurnFiles(item.turn_id);
  if (entry.view && live && item.status !== 'running') {
    entry.view.onDone = () => announce(`Agent: ${entry.node.querySelector('.md').textContent}`);
  }
}

// "N files changed" after a turn's last item (before its end block).
function showTurnFiles(turnId) {
  const old = turnFiles.get(turnId);
  const block = turnFilesBlock(turnId, itemsOfTurn(turnId));
  if (old) old.remove();
  turnFiles.delete(turnId);
  const nodes = [...entries.values()].filter((entry) => entry.item.turn_id === turnId).map((entry) => entry.node);
  const last = nodes[nodes.length - 1];
  if (!block || !last) return;
  last.after(block);
  turnFiles.set(turnId, block);
}

// How many paths this conversation's tool calls changed from `item` (a root message) on.
function changedSince(item) {
  const since = [...entries.values()]
    .map((entry) => entry.item)
    .filter((other) => (other.session_id === item.session_id ? other.seq >= item.seq : other.created_at >= item.created_at));
  return changedPaths(since).size;
}

export function applyDelta(delta) {
  const entry = entries.get(delta.item_id);
  // A delta for an item already stored in full (it came from /items) is already in its text.
  if (!entry || entry.item.status !== 'running') return;
  const field = delta.field === 'output' ? 'output' : 'text';
  entry.item[field] = (entry.item[field] || '') + delta.delta;
  if (field === 'output') {
    appendToolOutput(entry.node, delta.delta);
  } else if (entry.view) {
    entry.view.append(delta.delta);
  } else {
    const target = entry.node.querySelector('.text');
    if (target) {
      target.append(delta.delta);
      entry.node.hidden = false;
    }
  }
  // Following the growth is the ResizeObserver's job (once a frame), not every delta's.
}

// An approval changes a tool call's status with no item event of its own: it waits while it
// asks, and runs again once answered (what a snapshot would say).
export function setToolStatus(itemId, status) {
  const entry = entries.get(itemId);
  if (!entry || entry.item.kind !== 'tool_call' || entry.item.status === status) return;
  if (entry.item.status !== 'running' && entry.item.status !== 'waiting_approval') return;
  upsertItem({ ...entry.item, status }, false);
}

// A compaction's summary now stands for what it covers, and for any older summary.
export function markCompacted(summary) {
  for (const entry of [...entries.values()]) {
    const covered = entry.item.seq <= summary.covers_through_seq || (entry.item.kind === 'summary' && entry.item.id !== summary.id);
    if (covered && !entry.item.compacted) upsertItem({ ...entry.item, compacted: true }, false);
  }
  upsertItem(summary, true);
}

// The items whose place moved (an older item arrived late) get their shown times again.
function refreshTimes() {
  let last = 0;
  for (const node of $('items').querySelectorAll(':scope > [data-id]')) {
    const entry = entries.get(node.dataset.id);
    if (!entry) continue;
    const created = Date.parse(entry.item.created_at) || 0;
    entry.shownMs = Math.max(created, last);
    last = entry.shownMs;
    lastShownMs = last;
    const time = node.querySelector('time');
    if (time) time.replaceWith(timeElement(entry.item, entry.shownMs));
  }
}

// When the item joined the timeline, as far as the page can tell: not before it was written,
// and not before the item above it. (An item that goes in between gets its time from
// `refreshTimes`.)
function shownTime(item) {
  const created = Date.parse(item.created_at) || 0;
  lastShownMs = Math.max(created, lastShownMs);
  return lastShownMs;
}

function timeElement(item, shownMs) {
  const created = Date.parse(item.created_at) || shownMs;
  const later = shownMs - created > 1000;
  return el(
    'time',
    {
      datetime: new Date(shownMs).toISOString(),
      title: later
        ? `Sent ${fullTime(created)}; it joined the conversation when the agent took it, after what comes above.`
        : fullTime(shownMs),
    },
    clockTime(shownMs),
  );
}

function itemClasses(item) {
  const classes = ['item', item.kind.replace(/_/g, '-'), `status-${item.status}`];
  if (item.compacted) classes.push('compacted');
  if (item.kind === 'user_message' && item.source === 'agent') classes.push('from-agent');
  return classes.join(' ');
}

function statusBadge(item) {
  if (item.status === 'running') return el('span', { class: 'badge running' }, el('span', { class: 'spinner' }), 'writing');
  if (item.status === 'interrupted') return el('span', { class: 'badge interrupted', title: 'Stopped by an interrupt' }, 'interrupted');
  if (item.status === 'failed') return el('span', { class: 'badge failed' }, 'failed');
  return null;
}

function compactedBadge(item) {
  return item.compacted
    ? el('span', { class: 'badge compacted', title: 'The model now reads only the summary that covers this' }, 'compacted')
    : null;
}

function itemHead(item, shownMs) {
  const fromAgent = item.kind === 'user_message' && item.source === 'agent';
  // A message from another agent is the task or a message from the agent that spawned this
  // one, or a report from a sub-agent this one spawned.
  const sender = fromAgent ? state.sessions.find((s) => s.id === item.from_session_id) : null;
  const fromParent = fromAgent && sender && state.sessions.some((s) => s.id === item.session_id && s.parent_id === sender.id);
  const who =
    item.kind === 'user_message'
      ? fromAgent
        ? fromParent
          ? `From the agent that started this one, ${subAgentName(item.from_session_id)}`
          : `Report from sub-agent ${subAgentName(item.from_session_id)}`
        : 'You'
      : item.kind === 'agent_message'
        ? 'Agent'
        : item.kind === 'plan'
          ? 'Plan'
          : item.kind;
  const rewindable =
    item.kind === 'user_message' &&
    !fromAgent &&
    state.conv &&
    item.session_id === state.conv.root_session_id &&
    item.status !== 'running';
  return el(
    'div',
    { class: 'item-head' },
    el('span', { class: 'who' }, who),
    timeElement(item, shownMs),
    statusBadge(item),
    compactedBadge(item),
    el('span', { class: 'spacer' }),
    fromAgent && !fromParent && item.from_session_id
      ? el('button', {
        type: 'button',
        class: 'link-button',
        text: 'Open the sub-agent',
        onclick: () => document.dispatchEvent(new CustomEvent('show-session', { detail: item.from_session_id })),
      })
      : null,
    // The whole message as written (an answer's Markdown source), once it is complete.
    (item.kind === 'agent_message' || item.kind === 'user_message') && item.status !== 'running'
      ? copyTextButton(() => (entries.get(item.id) || { item }).item.text || '', 'Copy the whole message', 'link-button copy-message')
      : null,
    rewindable
      ? el('button', {
        type: 'button',
        class: 'link-button rewind-here',
        title: 'Copy the conversation up to just before this message into a new one, with this text in the message box to edit and send again. This conversation stays as it is.',
        text: 'Restart from here',
        onclick: () => rewind(item, changedSince(item)),
      })
      : null,
  );
}

function renderItem(item, shownMs, previous, entry) {
  const attrs = { class: itemClasses(item), 'data-seq': item.seq, 'data-id': item.id, 'data-turn': item.turn_id };
  switch (item.kind) {
    case 'user_message': {
      // A sub-agent's report carries its Markdown; the user's own text is shown as typed.
      let body;
      if (item.source === 'agent') {
        body = el('div', { class: 'md' });
        // The service's words around the report name the sub-agent by its session id.
        renderMarkdown(body, withNames(item.text || ''));
      } else {
        // A very long message (a pasted log) is shown folded, with Show all.
        body = longText(item.text, { expanded: wasExpanded(previous) });
      }
      // A command's expanded prompt, under the name it was sent by.
      const command = item.command ? el('div', { class: 'command-used' }, el('span', { class: 'command-name' }, `/${item.command.name}`), item.command.arguments ? ` ${item.command.arguments}` : '') : null;
      return el('div', attrs, itemHead(item, shownMs), command, body, imageList(item.images, 'attached image'), hookRuns(item.hooks));
    }
    case 'agent_message': {
      const body = el('div', { class: 'md' });
      const node = el('div', attrs, itemHead(item, shownMs), body);
      const view = new MarkdownView(body);
      view.set(item.text || '', item.status !== 'running');
      // A finished message from the history is on the page at once; a streaming one is drawn
      // frame by frame.
      if (item.status !== 'running') view.renderNow();
      if (entry) entry.view = view;
      return node;
    }
    case 'reasoning': {
      const wasOpen = previous && previous.tagName === 'DETAILS' ? previous.open : false;
      const details = el(
        'details',
        attrs,
        el('summary', {}, 'Reasoning ', statusBadge(item)),
        el('div', { class: 'text' }, item.text),
      );
      // Reasoning the provider kept to itself (only its encrypted state came back): nothing to read.
      if (!item.text && item.status !== 'running') details.hidden = true;
      details.open = wasOpen;
      return details;
    }
    case 'tool_call':
      return renderToolCall(item, attrs.class, {
        time: timeElement(item, shownMs),
        badge: compactedBadge(item),
        knownContent,
        previous,
      });
    case 'summary': {
      const wasOpen = previous && previous.tagName === 'DETAILS' ? previous.open : false;
      const body = el('div', { class: 'md' });
      renderMarkdown(body, item.text || '');
      const details = el(
        'details',
        attrs,
        el(
          'summary',
          {},
          'Context summary',
          el('span', { class: 'summary-note' }, item.compacted ? ' · folded into a later summary' : ' · the model reads it in place of the items marked “compacted”'),
          ' ',
          compactedBadge(item),
        ),
        body,
      );
      details.open = wasOpen;
      return details;
    }
    case 'plan':
      return el('div', attrs, itemHead(item, shownMs), planContent(item));
    case 'notice': {
      const notice = el('div', attrs, el('span', { class: 'text' }, item.text));
      // The end block of the turn says the same, for people.
      if (turnEnds.has(item.turn_id)) notice.hidden = true;
      return notice;
    }
    default:
      return el('div', attrs, itemHead(item, shownMs), el('pre', { class: 'arguments' }, JSON.stringify(item, null, 2)));
  }
}

// ------------------------------------------------------------------------------------------------
// How a turn ended, on the turn itself.

// A failed turn is marked in red with its error and a Retry button that runs it again (the
// same messages, not posted twice); an interrupted one says so. The turn's notice (written for the model: "the previous
// turn …") is folded into this block.
export function showTurnEnd(turnId, status, error) {
  if (status !== 'failed' && status !== 'interrupted') return;
  const old = turnEnds.get(turnId);
  if (old) old.remove();
  const items = itemsOfTurn(turnId);
  const notices = items.filter((item) => item.kind === 'notice');
  for (const notice of notices) entries.get(notice.id).node.hidden = true;
  const failed = status === 'failed';
  const sessionId = items.length ? items[0].session_id : null;
  const block = el(
    'div',
    { class: `turn-end ${status}`, 'data-turn': turnId },
    el('strong', {}, failed ? 'This turn failed.' : 'This turn was interrupted.'),
    ' ',
    failed
      ? el('span', { class: 'turn-error' }, error ? readableError(error) : 'The model call did not succeed.')
      : el('span', {}, notices.length ? noticeCause(notices[notices.length - 1].text) : 'What was written before the interrupt is kept.'),
    failed
      ? el('button', {
        type: 'button',
        class: 'retry-turn',
        text: 'Retry',
        title: 'Run this turn again, with the same messages',
        onclick: (event) => {
          const button = event.currentTarget;
          button.disabled = true;
          retryTurn(sessionId).finally(() => {
            button.disabled = false;
            // The button goes once the turn runs again (retireRetryButtons): the focus goes on to
            // the message box. Still here (the turn has not started yet, or could not), the button
            // takes back the focus its disabling lost.
            if (!button.isConnected) $('message').focus();
            else if (document.activeElement === document.body) button.focus();
          });
        },
      })
      : null,
  );
  turnEnds.set(turnId, block);
  let last = [...$('items').children].filter((node) => items.some((item) => item.id === node.dataset.id)).pop();
  // A call's approval card stays with its call, above the end.
  while (last && last.nextElementSibling && last.nextElementSibling.classList.contains('approval')) last = last.nextElementSibling;
  if (last) last.after(block);
  else $('items').append(block);
}

// A newer turn started: Retry belongs to the last turn only.
export function retireRetryButtons() {
  $('items').querySelectorAll('.turn-end .retry-turn').forEach((button) => {
    // A button that goes with the focus on it hands the focus to the message box, not the page.
    const focused = button === document.activeElement;
    button.remove();
    if (focused) $('message').focus();
  });
}

function readableError(error) {
  const text = String(error);
  return text.charAt(0).toUpperCase() + text.slice(1) + (/[.!?]$/.test(text) ? '' : '.');
}

function noticeCause(text) {
  if (/service stopped/.test(text)) return 'The service stopped before it finished; what was written is kept.';
  return 'What was written before the interrupt is kept.';
}
