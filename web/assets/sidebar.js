// The sidebar: the list of conversations (search, active or archived), kept live by the
// list-level stream `/api/events`. The list is one Tab stop (a roving tabindex: the row last
// moved to, else the open conversation's, else the first); the arrow keys, Home and End move
// between its rows. A row's link is what it focuses; its actions (rename, archive, delete) are
// in a menu opened by the "⋯" button or Shift+F10, so showing them never moves the rows. A row
// shows the whole title (on two lines if needed), for a fork or a rewind the conversation it
// came from, and for a fork into a copy of the tree that copy's directory. It says when its conversation waits for an approval (approvallist.js keeps
// which do), when it is working, or when its last turn failed or was interrupted. A link under
// the list leads to the remembered rules.

import { api, ApiError, loadSession, streamUrl } from './api.js';
import { $, el, enc, relTime } from './dom.js';
import { serviceBack } from './reconnect.js';
import { clearErrors, showError } from './banners.js';
import { closeMenu, isMenuOpen, openMenu } from './menu.js';
import { navigate, pendingApprovals, routeConversationId, state } from './state.js';
import { conversationTitle, knownTitle } from './titles.js';
import { worktreeMark } from './worktrees.js';

let renderWaiting = false; // a render put off while a row's menu is open
let rovingId = null; // the row of the list's Tab stop, once the keys or a focus chose it
let shownOpenId = null; // the open conversation at the last render: another one takes the stop

function listMatches(conversation) {
  return conversation.archived === state.list.archived;
}

function sortList() {
  state.list.conversations.sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0));
}

export async function loadList(more) {
  const request = ++state.list.request;
  const params = new URLSearchParams();
  params.set('archived', state.list.archived ? 'true' : 'false');
  if (state.list.q) params.set('q', state.list.q);
  params.set('limit', '50');
  if (more && state.list.nextCursor) params.set('cursor', state.list.nextCursor);
  try {
    const page = await api('GET', `/api/conversations?${params}`);
    if (request !== state.list.request) return;
    if (more) {
      const known = new Set(state.list.conversations.map((c) => c.id));
      state.list.conversations.push(...page.conversations.filter((c) => !known.has(c.id)));
    } else {
      state.list.conversations = page.conversations;
      state.list.snippets = new Map();
    }
    for (const [id, text] of Object.entries(page.snippets || {})) state.list.snippets.set(id, text);
    for (const conversation of page.conversations) state.titles.set(conversation.id, conversation.title);
    state.list.nextCursor = page.next_cursor;
    state.list.loaded = true;
    renderList();
  } catch (error) {
    if (request === state.list.request) showError(error);
  }
}

export function upsertListed(conversation) {
  state.titles.set(conversation.id, conversation.title);
  const list = state.list.conversations;
  const index = list.findIndex((c) => c.id === conversation.id);
  if (index >= 0) {
    // An answer can arrive after the stream already told of a later change (a short turn
    // ends before its POST is answered): never go back to an older state.
    if (Date.parse(list[index].updated_at) > Date.parse(conversation.updated_at)) return;
    if (listMatches(conversation)) list[index] = conversation;
    else list.splice(index, 1);
  } else if (listMatches(conversation) && !state.list.q) {
    // A search result list only takes changes of what it shows: it cannot tell whether
    // another conversation matches the search.
    list.push(conversation);
  }
  sortList();
  renderList();
}

export function removeListed(id) {
  state.list.conversations = state.list.conversations.filter((c) => c.id !== id);
  renderList();
}

export function listed(id) {
  return state.list.conversations.find((c) => c.id === id) || null;
}

export function renderList() {
  const ul = $('conversation-list');
  // Live updates wait while a title is edited or a row's menu is open: re-rendering would drop
  // the field or the menu's row.
  if (state.list.renaming && ul.querySelector('input.rename')) return;
  if (isMenuOpen() && ul.querySelector('[aria-expanded="true"]')) {
    renderWaiting = true;
    return;
  }
  renderWaiting = false;
  const focusedId = document.activeElement && ul.contains(document.activeElement) ? document.activeElement.closest('li')?.dataset.id : null;
  const openId = state.conv && state.view === 'conversation' ? state.conv.id : routeConversationId();
  if (openId !== shownOpenId) rovingId = null;
  shownOpenId = openId;
  const rows = state.list.conversations.map((conversation) => listRow(conversation, conversation.id === openId));
  ul.replaceChildren(...rows);
  const links = [...ul.querySelectorAll('a.conv-link')];
  const stop =
    links.find((link) => link.closest('li').dataset.id === rovingId) ||
    links.find((link) => link.closest('li').dataset.id === openId) ||
    links[0];
  if (stop) stop.tabIndex = 0;
  const empty = $('list-empty');
  if (state.list.loaded && rows.length === 0) {
    empty.hidden = false;
    empty.textContent = state.list.q
      ? 'Nothing matches this search.'
      : state.list.archived
        ? 'No archived conversations.'
        : 'No conversations yet. Write your first message to start one.';
  } else {
    empty.hidden = true;
  }
  $('load-more').hidden = !state.list.nextCursor;
  const input = ul.querySelector('input.rename');
  if (input && document.activeElement !== input) {
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  } else if (focusedId) {
    const link = ul.querySelector(`li[data-id="${CSS.escape(focusedId)}"] a.conv-link`);
    if (link) link.focus();
  }
}

// A tool call waits for the user's answer: the row says so in words (part of the link's name),
// instead of "working".
function approvalMark(waiting) {
  if (!waiting) return null;
  return el(
    'span',
    { class: 'row-badge awaiting', title: 'A tool call waits for your answer: open the conversation to allow or deny it' },
    el('span', { class: 'approval-dot', 'aria-hidden': 'true' }),
    waiting === 1 ? 'approval needed' : `${waiting} approvals needed`,
  );
}

// How the conversation's last turn ended, when that needs the reader's attention.
function turnMark(conversation) {
  if (conversation.status === 'running') return el('span', { class: 'row-badge running' }, el('span', { class: 'status-dot' }), 'working');
  const last = conversation.last_turn;
  if (last && last.status === 'failed') return el('span', { class: 'row-badge failed', title: last.error || '' }, 'failed');
  if (last && last.status === 'interrupted') return el('span', { class: 'row-badge interrupted' }, 'interrupted');
  return null;
}

// A fork or a rewind says where it came from: a mark and the source's title (asked for once
// when the list does not hold it; the list is drawn again when it is known).
function fromLine(conversation) {
  if (!conversation.forked_from) return null;
  const sourceId = conversation.forked_from.conversation_id;
  const title = knownTitle(sourceId);
  if (title === undefined) {
    conversationTitle(sourceId).then((known) => {
      if (known !== undefined) renderList();
    });
  }
  const text = title === null ? 'from a deleted conversation' : title === undefined ? 'from another conversation' : `from “${title}”`;
  return el('span', { class: 'conv-from', title: 'A fork or a restart of another conversation' }, el('span', { class: 'fork-mark', 'aria-hidden': 'true' }, '↳'), ' ', text);
}

// The words of the search, marked where the title has them. A conversation found by its messages
// (the service matches all the words in one title or one message) shows the text around the
// match, the words marked too (or says so, when the service sent no text).
function searchWords() {
  return [...new Set(state.list.q.toLowerCase().split(/\s+/).filter(Boolean))];
}

function markedTitle(title) {
  const words = state.list.q ? searchWords() : [];
  if (!words.length) return [title];
  const longestFirst = [...words].sort((a, b) => b.length - a.length);
  const pattern = new RegExp(longestFirst.map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'gi');
  const parts = [];
  let at = 0;
  for (const match of title.matchAll(pattern)) {
    if (match.index > at) parts.push(title.slice(at, match.index));
    parts.push(el('mark', {}, match[0]));
    at = match.index + match[0].length;
  }
  if (at < title.length) parts.push(title.slice(at));
  return parts;
}

function foundInMessages(conversation) {
  if (!state.list.q) return null;
  const snippet = state.list.snippets.get(conversation.id);
  if (snippet) return el('span', { class: 'conv-snippet' }, ...markedTitle(snippet));
  const lower = conversation.title.toLowerCase();
  if (searchWords().every((word) => lower.includes(word))) return null;
  return el('span', { class: 'conv-found' }, 'found in its messages');
}

function listRow(conversation, selected) {
  const id = conversation.id;
  const classes = ['conv'];
  const waiting = pendingApprovals((approval) => approval.conversation_id === id).length;
  if (selected) classes.push('selected');
  if (waiting) classes.push('awaiting-approval');
  if (conversation.status === 'running') classes.push('running');
  else if (conversation.last_turn && conversation.last_turn.status !== 'completed') classes.push(conversation.last_turn.status);
  if (state.list.renaming === id) {
    const input = el('input', {
      class: 'rename',
      type: 'text',
      value: state.list.renameValue,
      'aria-label': 'New title',
      oninput: (event) => {
        state.list.renameValue = event.target.value;
      },
      onkeydown: (event) => {
        if (event.key === 'Enter') {
          event.preventDefault();
          finishRename(id, true);
        } else if (event.key === 'Escape') {
          event.stopPropagation();
          finishRename(id, false);
        }
      },
      onblur: () => finishRename(id, true),
    });
    return el('li', { class: `${classes.join(' ')} renaming`, 'data-id': id }, input);
  }
  const cwdName = (conversation.cwd || '').split('/').filter(Boolean).pop() || '/';
  const title = conversation.title || '(untitled)';
  const menuButton = el('button', {
    type: 'button',
    class: 'conv-menu',
    tabindex: '-1',
    'aria-haspopup': 'menu',
    'aria-expanded': 'false',
    'aria-label': `Actions for “${title}”`,
    title: 'Rename, archive or delete',
    text: '⋯',
    onclick: () => showRowMenu(conversation, menuButton, link),
  });
  const link = el(
    'a',
    {
      class: 'conv-link',
      href: `#/c/${enc(id)}`,
      tabindex: '-1',
      title,
      'aria-current': selected ? 'page' : null,
      'aria-describedby': 'list-keys',
      'aria-keyshortcuts': 'Shift+F10 F2',
      onkeydown: (event) => rowKeys(event, conversation, menuButton, link),
      onfocus: () => moveTabStop(link),
    },
    el('span', { class: 'conv-title' }, markedTitle(title)),
    foundInMessages(conversation),
    fromLine(conversation),
    worktreeMark(conversation, 22, true),
    el('span', { class: 'conv-meta' }, approvalMark(waiting) || turnMark(conversation), el('span', { class: 'conv-when' }, relTime(conversation.updated_at), ` · ${cwdName}`)),
  );
  return el('li', { class: classes.join(' '), 'data-id': id }, link, menuButton);
}

// The list's one Tab stop moves to `link` (focused by a key, a click or a script).
function moveTabStop(link) {
  rovingId = link.closest('li').dataset.id;
  for (const other of $('conversation-list').querySelectorAll('a.conv-link')) other.tabIndex = other === link ? 0 : -1;
}

// Arrow keys, Home and End move between rows; Shift+F10 (or the context-menu key) opens the
// row's actions; F2 renames.
function rowKeys(event, conversation, menuButton, link) {
  const moves = { ArrowDown: 1, ArrowUp: -1, Home: -Infinity, End: Infinity };
  if (event.key in moves && !event.altKey && !event.ctrlKey && !event.metaKey) {
    event.preventDefault();
    const links = [...$('conversation-list').querySelectorAll('a.conv-link')];
    const target = links[Math.max(0, Math.min(links.length - 1, links.indexOf(link) + moves[event.key]))];
    if (target) target.focus();
  } else if (event.key === 'ContextMenu' || (event.key === 'F10' && event.shiftKey)) {
    event.preventDefault();
    showRowMenu(conversation, menuButton, link);
  } else if (event.key === 'F2') {
    event.preventDefault();
    startRename(conversation);
  }
}

function showRowMenu(conversation, menuButton, link) {
  openMenu(
    menuButton,
    [
      { label: 'Rename', run: () => startRename(conversation) },
      { label: conversation.archived ? 'Unarchive' : 'Archive', run: () => setArchived(conversation, !conversation.archived) },
      { label: 'Delete…', danger: true, run: () => deleteConversation(conversation) },
    ],
    `Actions for “${conversation.title}”`,
    () => {
      if (document.activeElement === menuButton && link.isConnected) link.focus();
      if (renderWaiting) renderList();
    },
  );
}

function startRename(conversation) {
  state.list.renaming = conversation.id;
  state.list.renameValue = conversation.title || '';
  renderList();
}

async function finishRename(id, save) {
  if (state.list.renaming !== id) return;
  const title = state.list.renameValue.trim();
  const before = state.list.conversations.find((c) => c.id === id);
  state.list.renaming = null;
  renderList();
  const link = $('conversation-list').querySelector(`li[data-id="${CSS.escape(id)}"] a.conv-link`);
  if (link) link.focus();
  if (!save || !title || (before && before.title === title)) return;
  try {
    const conversation = await api('PATCH', `/api/conversations/${enc(id)}`, { title });
    upsertListed(conversation);
    document.dispatchEvent(new CustomEvent('conversation-changed', { detail: conversation }));
  } catch (error) {
    showError(error);
  }
}

async function setArchived(conversation, archived) {
  try {
    const updated = await api('PATCH', `/api/conversations/${enc(conversation.id)}`, { archived });
    upsertListed(updated);
    document.dispatchEvent(new CustomEvent('conversation-changed', { detail: updated }));
  } catch (error) {
    showError(error);
  }
}

// A conversation that is working cannot be deleted: that is said first, instead of asking
// whether to delete it and then refusing.
function refuseRunning(conversation) {
  showError(new Error(`“${conversation.title}” is still working, so it cannot be deleted. Interrupt it first, then delete it.`), {
    action: {
      label: 'Interrupt it',
      run: () => api('POST', `/api/conversations/${enc(conversation.id)}/interrupt`, {}).catch(showError),
    },
  });
}

async function deleteConversation(conversation) {
  const current = listed(conversation.id) || conversation;
  if (current.status === 'running') {
    refuseRunning(current);
    return;
  }
  const sure = window.confirm(`Delete “${current.title}”?\n\nIts whole history is removed from disk. This cannot be undone.`);
  if (!sure) return;
  try {
    await api('DELETE', `/api/conversations/${enc(current.id)}`);
    removeListed(current.id);
    if (routeConversationId() === current.id) navigate('');
  } catch (error) {
    // It started working while the question was open.
    if (error instanceof ApiError && error.code === 'turn_running') refuseRunning(current);
    else showError(error);
  }
}

// ------------------------------------------------------------------------------------------------

// Returns the stream, for the modules that follow more of its events (approvallist.js).
export function openListStream() {
  const stream = new EventSource(streamUrl('/api/events'));
  const status = $('list-connection');
  stream.addEventListener('open', () => {
    status.hidden = true;
    clearErrors('network');
    // The service is back: what could not load without it loads now.
    serviceBack();
  });
  stream.addEventListener('error', () => {
    status.hidden = false;
    status.textContent = stream.readyState === EventSource.CLOSED ? 'Live updates stopped. Reload the page.' : 'Reconnecting…';
    // Refused: this browser's sign-in may have ended (signed out, revoked); the sign-in view
    // follows if so.
    if (stream.readyState === EventSource.CLOSED) loadSession().catch(() => {});
  });
  // A snapshot (first connection, or a reconnect that missed too much) means: reload the list
  // with the current filters, which the snapshot does not know about.
  stream.addEventListener('snapshot', () => loadList(false));
  stream.addEventListener('conversation.created', (event) => upsertListed(JSON.parse(event.data).conversation));
  stream.addEventListener('conversation.updated', (event) => upsertListed(JSON.parse(event.data).conversation));
  stream.addEventListener('conversation.deleted', (event) => removeListed(JSON.parse(event.data).conversation_id));
  return stream;
}

export function wireSidebar() {
  const search = $('search');
  let timer = null;
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      state.list.q = search.value.trim();
      state.list.nextCursor = null;
      loadList(false);
    }, 250);
  });
  const setArchivedFilter = (archived) => {
    state.list.archived = archived;
    state.list.nextCursor = null;
    $('show-active').setAttribute('aria-pressed', String(!archived));
    $('show-archived').setAttribute('aria-pressed', String(archived));
    state.list.conversations = [];
    state.list.loaded = false;
    closeMenu(false);
    renderList();
    loadList(false);
  };
  $('show-active').addEventListener('click', () => setArchivedFilter(false));
  $('show-archived').addEventListener('click', () => setArchivedFilter(true));
  $('load-more').addEventListener('click', () => loadList(true));
  // Relative times in the list age.
  setInterval(() => {
    if (!state.list.renaming) renderList();
  }, 60000);
}
