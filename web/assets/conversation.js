// One open conversation: GET it (which says clearly when it cannot open, and waits for the
// service when it does not answer), then follow its event stream. A snapshot (the first event,
// and again after a reconnect that missed too much) replaces everything: the stored history
// comes from /items, the running turn's items and the pending approvals from the snapshot, and
// events that arrive meanwhile wait in `state.queued`.

import { api, ApiError, streamUrl } from './api.js';
import { $, el, enc, plural } from './dom.js';
import { clearErrors, clearNoticesExcept, showError, showNotice } from './banners.js';
import { state } from './state.js';
import { removeListed, renderList, upsertListed } from './sidebar.js';
import { render, renderViewState } from './view.js';
import { renderHeader, renderTabs } from './header.js';
import { renderAgents } from './agents.js';
import { recoverLost, rememberWaiting, renderPending, restoreHeld } from './pending.js';
import { noteStreamed, renderUsage } from './meter.js';
import { renderComposer, restoreDraft } from './composer.js';
import {
  applyDelta,
  hasItem,
  markCompacted,
  resetTimeline,
  retireRetryButtons,
  showPlaceholder,
  setToolStatus,
  showTurnEnd,
  upsertItem,
} from './timeline.js';
import { resolveApprovalCard, showApproval } from './approvals.js';
import { noteConversationApprovals, noteRequested, noteResolved } from './approvallist.js';
import { addLine, clearRetry, removeLines, setConnection, showRetry } from './statuslines.js';
import { isUnreachable, whenBack } from './reconnect.js';
import { noteOutput, scrollToBottom } from './scroll.js';
import { interruptSession, retryNow } from './actions.js';
import { cue } from './attention.js';
import { loadProcesses, resetProcesses } from './processes.js';
import { loadTurnTokens, noteTurnEnded, showTurnTokens, useTurnTokens } from './turntokens.js';

const EVENTS = [
  'snapshot',
  'conversation.updated',
  'conversation.deleted',
  'conversation.moved',
  'session.created',
  'session.updated',
  'turn.started',
  'turn.ended',
  'item.started',
  'item.delta',
  'item.completed',
  'model.retry',
  'model.fallback',
  'usage.updated',
  'pending.updated',
  'compaction.started',
  'compaction.completed',
  'compaction.failed',
  'approval.requested',
  'approval.resolved',
];

export function closeConversation() {
  state.gen++;
  if (state.stream) state.stream.close();
  state.stream = null;
  state.conv = null;
  state.sessions = [];
  state.pending = [];
  state.usage = null;
  state.queued = [];
  state.loadingItems = false;
  state.historyShown = false;
  state.compacting = false;
  state.tab = 'conversation';
  resetTimeline();
  resetProcesses();
  setConnection(null);
}

export async function openConversation(id, sessionId) {
  closeConversation();
  const gen = state.gen;
  state.view = 'conversation';
  clearNoticesExcept(id);
  $('conversation-title').textContent = 'Loading…';
  $('conversation-meta').replaceChildren();
  render();
  let detail;
  try {
    detail = await api('GET', `/api/conversations/${enc(id)}`);
  } catch (error) {
    if (gen !== state.gen) return;
    if (isUnreachable(error)) showUnreachable(id, gen);
    else showBlocked(id, error);
    return;
  }
  if (gen !== state.gen) return;
  const { sessions, pending, usage, ...conversation } = detail;
  state.conv = conversation;
  state.titles.set(conversation.id, conversation.title);
  state.sessions = sessions || [];
  state.pending = pending || [];
  state.usage = usage || null;
  state.sessionId = sessionId || conversation.root_session_id;
  restoreDraft(id);
  restoreHeld(id);
  render();
  renderList();
  showArrival(conversation);
  showPlaceholder('Loading history…');
  follow(gen);
  loadProcesses(id);
  $('message').focus();
}

function showSession(sessionId) {
  state.tab = 'conversation';
  if (sessionId === state.sessionId) {
    render();
    return;
  }
  // A fresh stream gives a fresh snapshot, whose last_seq and running items cover this session.
  openConversation(state.conv.id, sessionId);
}

// After a fork or a rewind, the copy says what it is, that the original is unchanged, and links
// back to it. A fork into a copy of the tree also says where its files are, and what the copy
// did not take from the snapshot.
function showArrival(conversation) {
  const arrival = state.arrival;
  if (!arrival || arrival.id !== conversation.id) return;
  state.arrival = null;
  const original = el('a', { href: `#/c/${enc(arrival.source.id)}` }, `“${arrival.source.title}”`);
  const parts =
    arrival.kind !== 'fork'
      ? ['This copy of ', original, ' restarts just before your message, which is back in the message box: edit it and send it. The original is unchanged.']
      : arrival.worktree
        ? worktreeArrival(original, arrival.worktree)
        : ['This is a copy of ', original, ' up to its last finished turn. The original is unchanged.'];
  showNotice(parts, { key: 'arrival', conversationId: conversation.id });
}

function worktreeArrival(original, copy) {
  const what = copy.kind === 'git' ? 'a git worktree of its repository, with its uncommitted changes' : 'a copy of its files';
  const parts = ['This is a copy of ', original, ' up to its last finished turn, working in ', what, ': ', el('code', {}, copy.path), '. The original and its files are unchanged.'];
  if (copy.note) parts.push(` ${copy.note}`);
  const asIs = copy.copied_as_is || [];
  if (asIs.length) {
    const named = asIs.slice(0, 3).map((file) => (file.reason ? `${file.path} (${file.reason})` : file.path));
    const more = asIs.length > named.length ? `, and ${plural(asIs.length - named.length, 'other')}` : '';
    parts.push(` Left out of the snapshot, so copied as they are now: ${named.join(', ')}${more}.`);
  }
  return parts;
}

// The service does not answer (the page may have opened from the service worker's copy, offline):
// say so, and open the conversation by itself once the service answers again.
function showUnreachable(id, gen) {
  state.view = 'blocked';
  const retry = () => gen === state.gen && openConversation(id);
  $('blocked').replaceChildren(
    el('h2', {}, 'Reconnecting…'),
    el('p', {}, 'The OpenVaala service does not answer. Is it still running? The conversation opens by itself when the service is back.'),
    el('button', { type: 'button', text: 'Retry', onclick: retry }),
  );
  $('conversation-title').textContent = state.titles.get(id) || 'Reconnecting…';
  render();
  whenBack('conversation', retry);
}

function showBlocked(id, error) {
  state.view = 'blocked';
  const box = $('blocked');
  const title =
    error.status === 404
      ? 'This conversation does not exist (any more).'
      : error.code === 'cwd_missing'
        ? 'This conversation cannot open: its working directory is missing.'
        : error.code === 'conversation_damaged'
          ? 'This conversation cannot open: one of its files is damaged.'
          : 'This conversation cannot open.';
  const children = [el('h2', {}, title), el('p', { class: 'blocked-message' }, error.message)];
  if (error.code) children.push(el('p', { class: 'hint' }, el('code', {}, error.code)));
  if (error.code === 'cwd_missing') {
    const input = el('input', {
      type: 'text',
      placeholder: 'new absolute path of the working directory',
      'aria-label': 'New working directory',
      spellcheck: false,
    });
    const form = el(
      'form',
      {
        class: 'repoint',
        onsubmit: async (event) => {
          event.preventDefault();
          const cwd = input.value.trim();
          if (!cwd) return;
          try {
            await api('PATCH', `/api/conversations/${enc(id)}`, { cwd });
            openConversation(id);
          } catch (patchError) {
            showError(patchError);
          }
        },
      },
      el('p', {}, 'Recreate that directory and retry, or point the conversation to where it moved:'),
      el('div', { class: 'row' }, input, el('button', { type: 'submit', class: 'primary', text: 'Use this directory' })),
    );
    children.push(form);
  }
  if (error.status !== 404) children.push(el('button', { type: 'button', text: 'Retry', onclick: () => openConversation(id) }));
  box.replaceChildren(...children);
  $('conversation-title').textContent = 'Cannot open the conversation';
  render();
}

function follow(gen) {
  const id = state.conv.id;
  const stream = new EventSource(streamUrl(`/api/conversations/${enc(id)}/events`));
  state.stream = stream;
  let snapshots = 0;
  for (const type of EVENTS) {
    stream.addEventListener(type, (event) => {
      if (gen !== state.gen) return;
      let data;
      try {
        data = JSON.parse(event.data);
      } catch {
        return;
      }
      if (type === 'snapshot') {
        snapshots++;
        applySnapshot(data, gen);
      } else if (state.loadingItems) {
        state.queued.push([type, data]);
      } else {
        applyEvent(type, data);
      }
    });
  }
  stream.addEventListener('open', () => {
    if (gen !== state.gen) return;
    setConnection(null);
    // The service is back: what said it could not be reached is past.
    clearErrors('network');
  });
  stream.addEventListener('error', () => {
    if (gen !== state.gen) return;
    if (stream.readyState === EventSource.CLOSED) {
      // The service refused the stream (deleted, cannot open): ask why, and say it.
      setConnection('Live updates stopped.');
      api('GET', `/api/conversations/${enc(id)}`).then(
        () => {
          if (gen !== state.gen) return;
          setConnection('Live updates stopped: reconnecting…');
          setTimeout(() => gen === state.gen && follow(gen), 2000);
        },
        (error) => gen === state.gen && showBlocked(id, error),
      );
    } else {
      // EventSource reconnects by itself, sending Last-Event-ID.
      setConnection(snapshots ? 'Connection lost: reconnecting…' : 'Connecting…');
    }
  });
}

async function applySnapshot(snapshot, gen) {
  const load = ++state.itemsLoad;
  state.loadingItems = true;
  state.queued = [];
  state.conv = snapshot.conversation;
  state.sessions = snapshot.sessions || [];
  state.pending = snapshot.pending || [];
  state.usage = snapshot.usage || null;
  // What the ended turns cost; each turn that ends with a cost adds to it.
  state.cost = typeof snapshot.cost === 'number' ? snapshot.cost : null;
  if (!state.sessions.some((s) => s.id === state.sessionId)) state.sessionId = state.conv.root_session_id;
  render();
  const sessionId = state.sessionId;
  const lastSeq = (snapshot.last_seq || {})[sessionId] || 0;
  const stored = [];
  // The turns' token figures come with the history, fetched alongside it.
  const turnTokens = loadTurnTokens(state.conv.id, sessionId).catch(() => null);
  try {
    let after = null;
    while (lastSeq > 0) {
      const params = new URLSearchParams({ session: sessionId, limit: '1000' });
      if (after !== null) params.set('after_seq', String(after));
      const page = await api('GET', `/api/conversations/${enc(state.conv.id)}/items?${params}`);
      if (gen !== state.gen || load !== state.itemsLoad) return;
      for (const item of page.items) if (item.seq <= lastSeq) stored.push(item);
      const last = page.items.length ? page.items[page.items.length - 1].seq : null;
      if (page.next_after_seq === null || page.next_after_seq === undefined || last === null || last >= lastSeq) break;
      after = page.next_after_seq;
    }
  } catch (error) {
    if (gen !== state.gen || load !== state.itemsLoad) return;
    showError(error);
  }
  const tokens = await turnTokens;
  if (gen !== state.gen || load !== state.itemsLoad) return;
  if (tokens) useTurnTokens(tokens);
  resetTimeline();
  for (const item of stored) upsertItem(item, false);
  const running = (snapshot.running || []).filter((r) => r.session_id === sessionId);
  for (const turn of running) for (const item of turn.items || []) upsertItem(item, false);
  for (const turn of running) if (turn.retry) showRetry(turn.retry, retryActions(sessionId));
  if (!stored.length && !running.length) showPlaceholder('No messages yet.');
  // How the last turn ended, on the turn itself, when it did not complete.
  const last = state.conv.last_turn;
  if (last && sessionId === state.conv.root_session_id && hasAnyItemOf(stored, last.turn_id)) {
    showTurnEnd(last.turn_id, last.status, last.error);
    if (state.conv.status === 'running') retireRetryButtons();
  }
  state.compacting = !!snapshot.compacting;
  if (snapshot.compacting && sessionId === state.conv.root_session_id) addLine('muted compaction', compactionText('manual'));
  const approvals = snapshot.approvals || [];
  noteConversationApprovals(state.conv.id, approvals);
  for (const approval of approvals) {
    showApproval(approval, false);
    cue(state.conv, { approval });
  }
  showTurnTokens();
  recoverLost(hasItem);
  const queued = state.queued;
  state.queued = [];
  state.loadingItems = false;
  state.historyShown = true;
  for (const [type, data] of queued) applyEvent(type, data);
  render();
  scrollToBottom();
}

// An approval was settled (the stream says so, or this page's answer did first): the call runs
// again, as far as the page shows, and its card closes to the outcome.
function settleApproval(approval) {
  noteResolved(approval);
  if (viewing(approval.session_id)) setToolStatus(approval.item_id, 'running');
  resolveApprovalCard(approval, true);
}

// What the status line says while the context is compressed.
function compactionText(reason) {
  return reason === 'auto'
    ? 'The context is nearly full: summarizing the older history…'
    : 'Compressing the context: summarizing the older history…';
}

// The model failed for good: its fallback answers the rest of the turn.
function fallbackText(data) {
  return `${data.from} is unavailable (${data.reason}): ${data.to} answers the rest of this turn.`;
}

function setCompacting(compacting) {
  state.compacting = compacting;
  renderHeader();
}

function hasAnyItemOf(items, turnId) {
  return items.some((item) => item.turn_id === turnId);
}

function viewing(sessionId) {
  return sessionId === state.sessionId;
}

function applyEvent(type, data) {
  switch (type) {
    case 'conversation.updated':
      state.conv = data.conversation;
      upsertListed(data.conversation);
      renderHeader();
      renderComposer();
      renderViewState();
      break;
    case 'conversation.deleted':
      removeListed(data.conversation_id);
      if (state.stream) state.stream.close();
      showBlocked(data.conversation_id, new ApiError(404, 'not_found', 'It was deleted (maybe from another window).'));
      break;
    case 'conversation.moved':
      // The instance that served it lost it (cluster mode): the stream ends now, and the
      // browser reconnects with Last-Event-ID to wherever the conversation is.
      setConnection('Moved to another instance: reconnecting…');
      break;
    case 'session.created':
    case 'session.updated': {
      const index = state.sessions.findIndex((s) => s.id === data.session.id);
      if (index >= 0) state.sessions[index] = data.session;
      else state.sessions.push(data.session);
      renderTabs();
      renderAgents();
      renderComposer();
      renderViewState();
      break;
    }
    case 'turn.started':
      if (!viewing(data.session_id)) break;
      clearRetry();
      retireRetryButtons();
      break;
    case 'turn.ended':
      if (data.usage && typeof data.usage.cost === 'number') {
        state.cost = (state.cost || 0) + data.usage.cost;
        renderHeader();
      }
      if (data.session_id === state.conv.root_session_id) cue(state.conv, data);
      if (!viewing(data.session_id)) break;
      clearRetry();
      // The turn's figures name the models that answered it from now on.
      removeLines('fallback');
      noteOutput();
      showTurnEnd(data.turn_id, data.status, data.error);
      noteTurnEnded(state.conv.id, data.session_id, data.turn_id, data.usage);
      break;
    case 'item.started':
    case 'item.completed':
      if (!viewing(data.item.session_id)) break;
      if (type === 'item.started') clearRetry();
      noteOutput();
      upsertItem(data.item, true);
      break;
    case 'item.delta':
      if (data.session_id === state.conv.root_session_id) noteStreamed(data.delta.length);
      if (!viewing(data.session_id)) break;
      clearRetry();
      noteOutput();
      applyDelta(data);
      break;
    case 'model.retry':
      if (data.session_id && !viewing(data.session_id)) break;
      noteOutput();
      showRetry(data, retryActions(data.session_id || state.sessionId));
      break;
    case 'model.fallback':
      if (!viewing(data.session_id)) break;
      clearRetry();
      noteOutput();
      addLine('muted fallback', fallbackText(data));
      break;
    case 'usage.updated':
      state.usage = data.usage;
      renderUsage();
      break;
    case 'pending.updated':
      state.pending = data.pending || [];
      rememberWaiting();
      renderPending();
      break;
    case 'compaction.started':
      if (data.session_id === state.conv.root_session_id) setCompacting(true);
      if (viewing(data.session_id)) {
        noteOutput();
        addLine('muted compaction', compactionText(data.reason));
      }
      break;
    case 'compaction.completed':
      if (data.session_id === state.conv.root_session_id) setCompacting(false);
      if (data.usage) {
        state.usage = data.usage;
        renderUsage();
      }
      if (viewing(data.session_id)) {
        removeLines('compaction');
        if (data.summary) markCompacted(data.summary);
      }
      break;
    case 'compaction.failed':
      if (data.session_id === state.conv.root_session_id) setCompacting(false);
      if (viewing(data.session_id)) {
        removeLines('compaction');
        noteOutput();
        addLine('error', `Compressing the context failed: ${data.error}`);
      }
      break;
    case 'approval.requested':
      noteRequested(data.approval);
      cue(state.conv, { approval: data.approval });
      if (viewing(data.approval.session_id)) {
        noteOutput();
        setToolStatus(data.approval.item_id, 'waiting_approval');
      }
      showApproval(data.approval, true);
      break;
    case 'approval.resolved':
      settleApproval(data.approval);
      break;
    default:
      break;
  }
}

document.addEventListener('show-session', (event) => showSession(event.detail));
document.addEventListener('approval-resolved', (event) => {
  const approval = event.detail;
  if (state.conv && state.conv.id === approval.conversation_id && state.historyShown && !state.loadingItems) settleApproval(approval);
  else noteResolved(approval);
});
document.addEventListener('conversation-changed', (event) => {
  if (state.conv && state.conv.id === event.detail.id) {
    state.conv = event.detail;
    renderHeader();
  }
});

// What the retry line's buttons do for a session.
function retryActions(sessionId) {
  return { now: () => retryNow(sessionId), stop: () => interruptSession(sessionId) };
}
