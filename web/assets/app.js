// OpenVaala web UI: a plain client of the public HTTP + SSE API (API.md), no framework, no build.
// Everything it shows comes from the API; it never builds HTML from data (textContent only).
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;
  const page = document.body.dataset;

  // ---------------------------------------------------------------------------------------------
  // Small DOM helper: el('div', {class: 'x', onclick: f}, 'text', child, …). Strings become text
  // nodes, so data from the API can never inject markup.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else if (key === 'text') node.textContent = value;
      else if (key in node && key !== 'list') node[key] = value;
      else node.setAttribute(key, value === true ? '' : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function newKey() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    // randomUUID needs a secure context; getRandomValues does not (e.g. a LAN address).
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  function relTime(iso) {
    const then = Date.parse(iso);
    if (Number.isNaN(then)) return '';
    const seconds = (Date.now() - then) / 1000;
    if (seconds < 45) return 'just now';
    if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
    if (seconds < 7 * 86400) return `${Math.round(seconds / 86400)} d ago`;
    return new Date(then).toLocaleDateString();
  }

  function clockTime(iso) {
    const date = new Date(iso);
    return Number.isNaN(date.getTime())
      ? ''
      : date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  }

  function formatTokens(n) {
    if (n === null || n === undefined) return '?';
    if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 0 : 1)}M`;
    if (n >= 1e3) return `${(n / 1e3).toFixed(n >= 1e4 ? 0 : 1)}k`;
    return String(n);
  }

  function debounce(fn, ms) {
    let timer = null;
    return (...args) => {
      clearTimeout(timer);
      timer = setTimeout(() => fn(...args), ms);
    };
  }

  // ---------------------------------------------------------------------------------------------
  // The API. Off loopback the service wants a bearer token: it is read once from `?token=` and
  // kept for this tab; EventSource cannot send headers, so it goes in `access_token=` there.
  let token = sessionStorage.getItem('openvaala.token');
  {
    const url = new URL(location.href);
    if (url.searchParams.has('token')) {
      token = url.searchParams.get('token');
      sessionStorage.setItem('openvaala.token', token);
      url.searchParams.delete('token');
      history.replaceState(null, '', url);
    }
  }

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body, extraHeaders) {
    const headers = { accept: 'application/json', ...(extraHeaders || {}) };
    const options = { method, headers };
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      options.body = JSON.stringify(body);
    }
    if (token) headers.authorization = `Bearer ${token}`;
    let response;
    try {
      response = await fetch(path, options);
    } catch (error) {
      throw new ApiError(0, 'network', `The service did not answer (${error.message}). Is it still running?`);
    }
    if (response.status === 204) return null;
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!response.ok) {
      const error = data && data.error;
      if (response.status === 401) askForToken();
      throw new ApiError(
        response.status,
        (error && error.code) || `http_${response.status}`,
        (error && error.message) || `${response.status} ${response.statusText}`,
      );
    }
    return data;
  }

  function streamUrl(path) {
    if (!token) return path;
    return `${path}${path.includes('?') ? '&' : '?'}access_token=${enc(token)}`;
  }

  let askedForToken = false;
  function askForToken() {
    if (askedForToken) return;
    askedForToken = true;
    const given = window.prompt('This service needs its access token (OPENVAALA_TOKEN):');
    if (given) {
      sessionStorage.setItem('openvaala.token', given.trim());
      location.reload();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Banners: every API error is shown with its message, dismissable; an optional action button.
  function showError(error, action) {
    if (error && error.name === 'AbortError') return;
    const message = error instanceof ApiError || error instanceof Error ? error.message : String(error);
    const code = error instanceof ApiError ? error.code : null;
    const banners = $('banners');
    // The same message twice in a row is shown once.
    for (const existing of banners.children) {
      if (existing.dataset.message === message) existing.remove();
    }
    const banner = el(
      'div',
      { class: 'banner error', role: 'alert' },
      el('span', { class: 'banner-text' }, message),
      code ? el('code', { class: 'banner-code' }, code) : null,
      action
        ? el('button', {
          type: 'button',
          class: 'banner-action',
          text: action.label,
          onclick: () => {
            banner.remove();
            action.run();
          },
        })
        : null,
      el('button', {
        type: 'button',
        class: 'banner-close',
        title: 'Dismiss',
        'aria-label': 'Dismiss',
        text: '×',
        onclick: () => banner.remove(),
      }),
    );
    banner.dataset.message = message;
    banners.append(banner);
    while (banners.children.length > 3) banners.firstElementChild.remove();
  }

  // ---------------------------------------------------------------------------------------------
  // State. `view` is what the main area shows; `conv` the open conversation and everything the
  // live stream keeps current.
  const state = {
    list: {
      archived: false,
      q: '',
      conversations: [],
      nextCursor: null,
      request: 0,
      renaming: null,
      renameValue: '',
      loaded: false,
    },
    view: 'welcome', // 'welcome' | 'new' | 'conversation' | 'blocked'
    gen: 0, // bumped whenever the open conversation changes: late answers for an old one are dropped
    conv: null,
    sessions: [],
    pending: [],
    usage: null,
    sessionId: null, // the session shown in the timeline: the root agent's, or a sub-agent's
    tab: 'conversation',
    items: new Map(), // item id → { item, node }
    stream: null,
    loadingItems: false,
    itemsLoad: 0,
    queued: [],
    pendingEdit: null, // { id, value } while a waiting message is being edited
    send: { key: null, text: null, busy: false },
    drafts: new Map(), // conversation id (or 'new') → unsent composer text
    models: [],
    newCwd: '',
  };

  // ---------------------------------------------------------------------------------------------
  // Sidebar: the list, kept live by /api/events.
  function listMatches(conversation) {
    const archived = state.list.archived;
    return conversation.archived === archived;
  }

  function sortList() {
    state.list.conversations.sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0));
  }

  async function loadList(more) {
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
      }
      state.list.nextCursor = page.next_cursor;
      state.list.loaded = true;
      renderList();
    } catch (error) {
      if (request === state.list.request) showError(error);
    }
  }

  function upsertListed(conversation) {
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

  function removeListed(id) {
    state.list.conversations = state.list.conversations.filter((c) => c.id !== id);
    renderList();
  }

  function renderList() {
    const ul = $('conversation-list');
    // Live updates wait while a title is being edited: re-rendering would drop the field.
    if (state.list.renaming && ul.querySelector('input.rename')) return;
    const openId = state.conv && state.view === 'conversation' ? state.conv.id : currentRouteId();
    const rows = state.list.conversations.map((conversation) => listRow(conversation, conversation.id === openId));
    ul.replaceChildren(...rows);
    const empty = $('list-empty');
    if (state.list.loaded && rows.length === 0) {
      empty.hidden = false;
      empty.textContent = state.list.q
        ? 'Nothing matches this search.'
        : state.list.archived
          ? 'No archived conversations.'
          : 'No conversations yet. Start one with “New conversation”.';
    } else {
      empty.hidden = true;
    }
    $('load-more').hidden = !state.list.nextCursor;
    const input = ul.querySelector('input.rename');
    if (input && document.activeElement !== input) {
      input.focus();
      input.setSelectionRange(input.value.length, input.value.length);
    }
  }

  function listRow(conversation, selected) {
    const id = conversation.id;
    const running = conversation.status === 'running';
    const classes = ['conv'];
    if (selected) classes.push('selected');
    if (running) classes.push('running');
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
            finishRename(id, false);
          }
        },
        onblur: () => finishRename(id, true),
      });
      return el('li', { class: `${classes.join(' ')} renaming` }, input);
    }
    const cwdName = (conversation.cwd || '').split('/').filter(Boolean).pop() || '/';
    const link = el(
      'a',
      { class: 'conv-link', href: `#/c/${enc(id)}`, title: conversation.title },
      el('span', { class: 'conv-title' }, conversation.title || '(untitled)'),
      el(
        'span',
        { class: 'conv-meta' },
        running ? el('span', { class: 'status-dot', title: 'a turn is running' }) : null,
        running ? 'working · ' : '',
        relTime(conversation.updated_at),
        ` · ${cwdName}`,
      ),
    );
    const actions = el(
      'div',
      { class: 'conv-actions' },
      el('button', {
        type: 'button',
        text: 'Rename',
        onclick: () => {
          state.list.renaming = id;
          state.list.renameValue = conversation.title || '';
          renderList();
        },
      }),
      el('button', {
        type: 'button',
        text: conversation.archived ? 'Unarchive' : 'Archive',
        onclick: () => setArchived(conversation, !conversation.archived),
      }),
      el('button', {
        type: 'button',
        class: 'danger-text',
        text: 'Delete',
        onclick: () => deleteConversation(conversation),
      }),
    );
    return el('li', { class: classes.join(' ') }, link, actions);
  }

  async function finishRename(id, save) {
    if (state.list.renaming !== id) return;
    const title = state.list.renameValue.trim();
    const before = state.list.conversations.find((c) => c.id === id);
    state.list.renaming = null;
    renderList();
    if (!save || !title || (before && before.title === title)) return;
    try {
      const conversation = await api('PATCH', `/api/conversations/${enc(id)}`, { title });
      upsertListed(conversation);
      if (state.conv && state.conv.id === id) {
        state.conv = conversation;
        renderHeader();
      }
    } catch (error) {
      showError(error);
    }
  }

  async function setArchived(conversation, archived) {
    try {
      const updated = await api('PATCH', `/api/conversations/${enc(conversation.id)}`, { archived });
      upsertListed(updated);
      if (state.conv && state.conv.id === updated.id) {
        state.conv = updated;
        renderHeader();
      }
    } catch (error) {
      showError(error);
    }
  }

  async function deleteConversation(conversation) {
    const sure = window.confirm(
      `Delete “${conversation.title}”?\n\nIts whole history is removed from disk. This cannot be undone.`,
    );
    if (!sure) return;
    try {
      await api('DELETE', `/api/conversations/${enc(conversation.id)}`);
      removeListed(conversation.id);
      if (currentRouteId() === conversation.id) location.hash = '';
    } catch (error) {
      if (error.code === 'turn_running') {
        showError(
          new ApiError(
            error.status,
            error.code,
            `“${conversation.title}” is still working, so it cannot be deleted yet. Interrupt it first, then delete.`,
          ),
          {
            label: 'Interrupt it',
            run: () => api('POST', `/api/conversations/${enc(conversation.id)}/interrupt`, {}).catch(showError),
          },
        );
      } else {
        showError(error);
      }
    }
  }

  let listStream = null;
  function openListStream() {
    listStream = new EventSource(streamUrl('/api/events'));
    const status = $('list-connection');
    listStream.addEventListener('open', () => {
      status.hidden = true;
    });
    listStream.addEventListener('error', () => {
      status.hidden = false;
      status.textContent =
        listStream.readyState === EventSource.CLOSED ? 'Live updates stopped. Reload the page.' : 'Reconnecting…';
    });
    // A snapshot (first connection, or a reconnect that missed too much) means: reload the list
    // with the current filters, which the snapshot does not know about.
    listStream.addEventListener('snapshot', () => loadList(false));
    listStream.addEventListener('conversation.created', (event) => {
      upsertListed(JSON.parse(event.data).conversation);
    });
    listStream.addEventListener('conversation.updated', (event) => {
      upsertListed(JSON.parse(event.data).conversation);
    });
    listStream.addEventListener('conversation.deleted', (event) => {
      removeListed(JSON.parse(event.data).conversation_id);
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Routing: #/c/<id> opens a conversation, #/new the empty composer, anything else the welcome.
  function currentRouteId() {
    const match = /^#\/c\/([^/]+)/.exec(location.hash);
    return match ? decodeURIComponent(match[1]) : null;
  }

  function route() {
    saveDraft();
    document.body.classList.remove('sidebar-open');
    const id = currentRouteId();
    if (id) {
      if (!state.conv || state.conv.id !== id || state.view !== 'conversation') openConversation(id);
    } else if (location.hash === '#/new') {
      openNew();
    } else {
      closeConversation();
      state.view = 'welcome';
      render();
    }
    renderList();
  }

  function draftKey() {
    if (state.view === 'new') return 'new';
    return state.conv ? state.conv.id : null;
  }

  function saveDraft() {
    const key = draftKey();
    if (!key) return;
    const text = $('message').value;
    if (text) state.drafts.set(key, text);
    else state.drafts.delete(key);
    if (state.view === 'new') state.newCwd = $('cwd').value;
  }

  function restoreDraft(key) {
    $('message').value = state.drafts.get(key) || '';
  }

  function closeConversation() {
    state.gen++;
    if (state.stream) state.stream.close();
    state.stream = null;
    state.conv = null;
    state.sessions = [];
    state.pending = [];
    state.usage = null;
    state.items.clear();
    state.queued = [];
    state.loadingItems = false;
    state.pendingEdit = null;
    state.tab = 'conversation';
    $('items').replaceChildren();
    $('live-lines').replaceChildren();
  }

  function openNew(text, cwd) {
    closeConversation();
    state.view = 'new';
    if (text !== undefined) state.drafts.set('new', text);
    if (cwd !== undefined) state.newCwd = cwd;
    $('cwd').value = state.newCwd || '';
    restoreDraft('new');
    render();
    if (location.hash !== '#/new') history.replaceState(null, '', '#/new');
    $('message').focus();
  }

  // ---------------------------------------------------------------------------------------------
  // One conversation: GET it (which says clearly when it cannot open), then follow its stream.
  async function openConversation(id, sessionId) {
    closeConversation();
    const gen = state.gen;
    state.view = 'conversation';
    $('conversation-title').textContent = 'Loading…';
    $('conversation-meta').replaceChildren();
    render();
    let detail;
    try {
      detail = await api('GET', `/api/conversations/${enc(id)}`);
    } catch (error) {
      if (gen !== state.gen) return;
      showBlocked(id, error);
      return;
    }
    if (gen !== state.gen) return;
    const { sessions, pending, usage, ...conversation } = detail;
    state.conv = conversation;
    state.sessions = sessions || [];
    state.pending = pending || [];
    state.usage = usage || null;
    state.sessionId = sessionId || conversation.root_session_id;
    restoreDraft(id);
    render();
    renderList();
    $('items').replaceChildren(el('p', { class: 'loading' }, 'Loading history…'));
    followConversation(gen);
    $('message').focus();
  }

  function showBlocked(id, error) {
    state.view = 'blocked';
    const box = $('blocked');
    const title =
      error.status === 404
        ? 'This conversation does not exist (any more).'
        : error.code === 'cwd_missing'
          ? 'This conversation cannot open: its working directory is missing.'
          : 'This conversation cannot open.';
    const children = [el('h2', {}, title), el('p', { class: 'blocked-message' }, error.message)];
    if (error.code) children.push(el('p', { class: 'hint' }, el('code', {}, error.code)));
    if (error.code === 'cwd_missing') {
      const input = el('input', {
        type: 'text',
        placeholder: 'new absolute path of the working directory',
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
    if (error.status !== 404) {
      children.push(el('button', { type: 'button', text: 'Retry', onclick: () => openConversation(id) }));
    }
    box.replaceChildren(...children);
    $('conversation-title').textContent = 'Cannot open the conversation';
    render();
  }

  const CONVERSATION_EVENTS = [
    'snapshot',
    'conversation.updated',
    'conversation.deleted',
    'session.created',
    'session.updated',
    'turn.started',
    'turn.ended',
    'item.started',
    'item.delta',
    'item.completed',
    'model.retry',
    'usage.updated',
    'pending.updated',
    'compaction.started',
    'compaction.completed',
    'compaction.failed',
  ];

  function followConversation(gen) {
    const id = state.conv.id;
    const stream = new EventSource(streamUrl(`/api/conversations/${enc(id)}/events`));
    state.stream = stream;
    for (const type of CONVERSATION_EVENTS) {
      stream.addEventListener(type, (event) => {
        if (gen !== state.gen) return;
        let data;
        try {
          data = JSON.parse(event.data);
        } catch {
          return;
        }
        if (type === 'snapshot') {
          applySnapshot(data, gen);
        } else if (state.loadingItems) {
          state.queued.push([type, data]);
        } else {
          applyEvent(type, data);
        }
      });
    }
    stream.addEventListener('open', () => {
      if (gen === state.gen) setConnection(null);
    });
    stream.addEventListener('error', () => {
      if (gen !== state.gen) return;
      if (stream.readyState === EventSource.CLOSED) {
        // The service refused the stream (deleted, cannot open): ask why, and say it.
        setConnection('Live updates stopped.');
        api('GET', `/api/conversations/${enc(id)}`).then(
          () => {
            if (gen === state.gen) {
              setConnection('Live updates stopped: reconnecting…');
              setTimeout(() => gen === state.gen && followConversation(gen), 2000);
            }
          },
          (error) => gen === state.gen && showBlocked(id, error),
        );
      } else {
        // EventSource reconnects by itself, sending Last-Event-ID.
        setConnection('Connection lost: reconnecting…');
      }
    });
  }

  function setConnection(text) {
    const lines = $('live-lines');
    let line = lines.querySelector('.connection-line');
    if (!text) {
      if (line) line.remove();
      return;
    }
    if (!line) {
      line = el('div', { class: 'line connection-line' });
      lines.append(line);
    }
    line.textContent = text;
  }

  // A snapshot replaces everything: the stored history up to `last_seq` comes from /items, the
  // running turn's items (with their partial text and output) from the snapshot itself, and
  // events that arrive meanwhile wait in `queued`.
  async function applySnapshot(snapshot, gen) {
    const load = ++state.itemsLoad;
    state.loadingItems = true;
    state.queued = [];
    state.conv = snapshot.conversation;
    state.sessions = snapshot.sessions || [];
    state.pending = snapshot.pending || [];
    state.usage = snapshot.usage || null;
    if (!state.sessions.some((s) => s.id === state.sessionId)) state.sessionId = state.conv.root_session_id;
    render();
    const sessionId = state.sessionId;
    const lastSeq = (snapshot.last_seq || {})[sessionId] || 0;
    const stored = [];
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
    if (gen !== state.gen || load !== state.itemsLoad) return;
    state.items.clear();
    $('items').replaceChildren();
    $('live-lines').querySelectorAll('.line:not(.connection-line)').forEach((line) => line.remove());
    for (const item of stored) upsertItem(item);
    for (const running of snapshot.running || []) {
      if (running.session_id !== sessionId) continue;
      for (const item of running.items || []) upsertItem(item);
    }
    if (!stored.length && !(snapshot.running || []).length) {
      $('items').append(el('p', { class: 'loading empty-history' }, 'No messages yet.'));
    }
    if (snapshot.compacting && sessionId === state.conv.root_session_id) {
      addLine('muted compaction', 'Compressing the context (manual)…');
    }
    const queued = state.queued;
    state.queued = [];
    state.loadingItems = false;
    for (const [type, data] of queued) applyEvent(type, data);
    render();
    scrollToBottom(true);
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
        break;
      case 'conversation.deleted':
        removeListed(data.conversation_id);
        if (state.stream) state.stream.close();
        showBlocked(data.conversation_id, new ApiError(404, 'not_found', 'It was deleted (maybe from another client).'));
        break;
      case 'session.created':
      case 'session.updated': {
        const index = state.sessions.findIndex((s) => s.id === data.session.id);
        if (index >= 0) state.sessions[index] = data.session;
        else state.sessions.push(data.session);
        renderTabs();
        renderAgents();
        renderComposer();
        break;
      }
      case 'turn.started':
        if (viewing(data.session_id)) clearRetryLines();
        break;
      case 'turn.ended':
        if (!viewing(data.session_id)) break;
        // An interrupted or failed turn leaves a stored notice item that says why.
        clearRetryLines();
        break;
      case 'item.started':
      case 'item.completed':
        if (!viewing(data.item.session_id)) break;
        upsertItem(data.item);
        break;
      case 'item.delta':
        if (viewing(data.session_id)) applyDelta(data);
        break;
      case 'model.retry':
        if (!viewing(data.session_id) && data.session_id) break;
        addLine(
          'retry',
          `Model call failed — retrying (attempt ${data.attempt}/${data.max_attempts}) in ${(data.delay_ms / 1000).toFixed(1)}s: ${data.error}`,
        );
        break;
      case 'usage.updated':
        state.usage = data.usage;
        renderUsage();
        break;
      case 'pending.updated':
        state.pending = data.pending || [];
        renderPending();
        break;
      case 'compaction.started':
        if (viewing(data.session_id)) {
          addLine('muted compaction', `Compressing the context (${data.reason})…`);
        }
        break;
      case 'compaction.completed':
        if (data.usage) {
          state.usage = data.usage;
          renderUsage();
        }
        if (viewing(data.session_id)) {
          $('items').querySelectorAll('.line.compaction').forEach((line) => line.remove());
          if (data.summary) {
            // The summary now stands for what it covers, and for any older summary.
            const covers = data.summary.covers_through_seq;
            for (const { item } of [...state.items.values()]) {
              const covered = item.seq <= covers || (item.kind === 'summary' && item.id !== data.summary.id);
              if (covered && !item.compacted) upsertItem({ ...item, compacted: true });
            }
            upsertItem(data.summary);
          }
        }
        break;
      case 'compaction.failed':
        if (viewing(data.session_id)) {
          $('items').querySelectorAll('.line.compaction').forEach((line) => line.remove());
          addLine('error', `Compressing the context failed: ${data.error}`);
        }
        break;
      default:
        break;
    }
  }

  // Lines that are not items (retries, a failed turn's error) sit in the timeline where they
  // happened; they are not stored, so a fresh snapshot drops them.
  function addLine(kind, text) {
    const atBottom = isAtBottom();
    const line = el('div', { class: `line ${kind}` }, text);
    $('items').append(line);
    if (atBottom) scrollToBottom();
  }

  function clearRetryLines() {
    $('items').querySelectorAll('.line.retry').forEach((line) => line.remove());
  }

  // ---------------------------------------------------------------------------------------------
  // Items.
  // The timeline follows new output while the reader is at its end, and stays put once they
  // scroll up. Growth (streamed text, a banner shrinking the view) is caught by a ResizeObserver.
  let stickToBottom = true;

  function isAtBottom() {
    return stickToBottom;
  }

  function scrollToBottom(force) {
    const timeline = $('timeline');
    if (force) stickToBottom = true;
    if (stickToBottom) timeline.scrollTop = timeline.scrollHeight;
  }

  function watchTimeline() {
    const timeline = $('timeline');
    timeline.addEventListener('scroll', () => {
      stickToBottom = timeline.scrollHeight - timeline.scrollTop - timeline.clientHeight < 60;
    });
    if (window.ResizeObserver) {
      const observer = new ResizeObserver(() => scrollToBottom(false));
      observer.observe(timeline);
      observer.observe($('items'));
    }
  }

  function upsertItem(item) {
    const atBottom = isAtBottom();
    const container = $('items');
    const placeholder = container.querySelector('.empty-history, .loading');
    if (placeholder) placeholder.remove();
    const existing = state.items.get(item.id);
    const node = renderItem(item, existing && existing.node);
    if (existing) {
      existing.node.replaceWith(node);
    } else {
      // Items arrive in order; an older one (a late completion) goes before the first newer one.
      const later = [...state.items.values()].filter((entry) => entry.item.seq > item.seq);
      if (later.length) {
        const first = later.reduce((a, b) => (a.item.seq < b.item.seq ? a : b));
        container.insertBefore(node, first.node);
      } else {
        container.append(node);
      }
    }
    state.items.set(item.id, { item, node });
    if (atBottom) scrollToBottom(true);
    const output = node.querySelector('.output');
    if (output && item.status === 'running') output.scrollTop = output.scrollHeight;
  }

  function applyDelta(delta) {
    const entry = state.items.get(delta.item_id);
    // A delta for an item already stored in full (it came from /items) is already in its text.
    if (!entry || entry.item.status !== 'running') return;
    const field = delta.field === 'output' ? 'output' : 'text';
    entry.item[field] = (entry.item[field] || '') + delta.delta;
    const atBottom = isAtBottom();
    const target = entry.node.querySelector(field === 'output' ? '.output' : '.text');
    if (target) {
      target.hidden = false;
      target.append(delta.delta);
      if (field === 'output') target.scrollTop = target.scrollHeight;
    }
    if (atBottom) scrollToBottom(true);
  }

  function statusBadge(item) {
    if (item.status === 'running') return el('span', { class: 'badge running' }, el('span', { class: 'spinner' }), 'running');
    if (item.status === 'interrupted') return el('span', { class: 'badge interrupted', title: 'Stopped by an interrupt' }, 'interrupted');
    if (item.status === 'failed') return el('span', { class: 'badge failed' }, 'failed');
    return null;
  }

  function itemHead(label, item, ...extra) {
    return el(
      'div',
      { class: 'item-head' },
      el('span', { class: 'who' }, label),
      el('time', { datetime: item.created_at, title: item.created_at }, clockTime(item.created_at)),
      statusBadge(item),
      item.compacted
        ? el('span', { class: 'badge compacted', title: 'The model now sees only the summary that covers this' }, 'compacted')
        : null,
      el('span', { class: 'spacer' }),
      ...extra,
    );
  }

  function renderItem(item, previous) {
    const classes = ['item', item.kind.replace('_', '-'), `status-${item.status}`];
    if (item.compacted) classes.push('compacted');
    const wasOpen = previous && previous.tagName === 'DETAILS' ? previous.open : null;
    switch (item.kind) {
      case 'user_message': {
        const fromAgent = item.source === 'agent';
        const rewindable =
          !fromAgent && state.conv && item.session_id === state.conv.root_session_id && item.status !== 'running';
        const images = (item.images || []).map((image) =>
          image.data
            ? el('img', { src: `data:${image.media_type};base64,${image.data}`, alt: 'attached image' })
            : el('a', { href: image.url, target: '_blank', rel: 'noopener noreferrer' }, image.url),
        );
        return el(
          'div',
          { class: classes.join(' ') + (fromAgent ? ' from-agent' : ''), 'data-seq': item.seq },
          itemHead(
            fromAgent ? `Report from sub-agent ${sessionLabel(item.from_session_id)}` : 'You',
            item,
            rewindable
              ? el('button', {
                type: 'button',
                class: 'link-button',
                title: 'Copy the conversation up to just before this message into a new one, with this text in the box',
                text: 'Restart from here',
                onclick: () => rewind(item),
              })
              : null,
          ),
          el('div', { class: 'text' }, item.text),
          images.length ? el('div', { class: 'images' }, images) : null,
        );
      }
      case 'agent_message':
        return el(
          'div',
          { class: classes.join(' '), 'data-seq': item.seq },
          itemHead('Agent', item),
          el('div', { class: 'text' }, item.text),
        );
      case 'reasoning': {
        const details = el(
          'details',
          { class: classes.join(' '), 'data-seq': item.seq },
          el('summary', {}, 'Reasoning ', statusBadge(item)),
          el('div', { class: 'text' }, item.text),
        );
        // Reasoning the provider kept to itself (only its encrypted state came back): nothing to read.
        if (!item.text && item.status !== 'running') details.hidden = true;
        if (wasOpen) details.open = true;
        return details;
      }
      case 'tool_call': {
        const args = item.arguments || {};
        const shown =
          item.name === 'shell' && typeof args.command === 'string'
            ? `$ ${args.command}`
            : JSON.stringify(args, null, 2);
        const exit =
          item.exit_code === null || item.exit_code === undefined
            ? null
            : el('span', { class: `badge exit ${item.exit_code === 0 ? 'ok' : 'bad'}` }, `exit ${item.exit_code}`);
        const output = el('pre', { class: 'output' }, item.output || '');
        // Shown once there is output (a delta un-hides it).
        if (!item.output) output.hidden = true;
        return el(
          'div',
          { class: classes.join(' '), 'data-seq': item.seq },
          itemHead(`Tool: ${item.name}`, item, exit),
          el('pre', { class: 'arguments' }, shown),
          output,
        );
      }
      case 'summary': {
        const details = el(
          'details',
          { class: classes.join(' '), 'data-seq': item.seq },
          el('summary', {}, `Context summary (stands for the history through #${item.covers_through_seq})`),
          el('div', { class: 'text' }, item.text),
        );
        if (wasOpen) details.open = true;
        return details;
      }
      case 'notice':
        return el('div', { class: classes.join(' '), 'data-seq': item.seq }, el('span', { class: 'text' }, item.text));
      default:
        return el(
          'div',
          { class: classes.join(' '), 'data-seq': item.seq },
          itemHead(item.kind, item),
          el('pre', { class: 'arguments' }, JSON.stringify(item, null, 2)),
        );
    }
  }

  function sessionLabel(sessionId) {
    const session = state.sessions.find((s) => s.id === sessionId);
    return session ? `“${session.agent}”` : sessionId || '';
  }

  // ---------------------------------------------------------------------------------------------
  // Rendering of the main area.
  function render() {
    const view = state.view;
    $('welcome').hidden = view !== 'welcome';
    $('blocked').hidden = view !== 'blocked';
    const inConversation = view === 'conversation';
    const showAgents = inConversation && state.tab === 'agents';
    $('timeline').hidden = !(inConversation && !showAgents);
    $('agents').hidden = !showAgents;
    $('composer').hidden = !(view === 'new' || (inConversation && !showAgents));
    $('new-fields').hidden = view !== 'new';
    $('conversation-actions').hidden = !(inConversation && state.conv);
    if (view !== 'conversation') document.title = 'OpenVaala';
    if (view === 'new') {
      $('conversation-title').textContent = 'New conversation';
      $('conversation-meta').replaceChildren(
        el('span', {}, 'Nothing is stored until you send the first message.'),
      );
    } else if (view === 'welcome') {
      $('conversation-title').textContent = 'OpenVaala';
      $('conversation-meta').replaceChildren();
    }
    renderHeader();
    renderTabs();
    renderAgents();
    renderPending();
    renderUsage();
    renderComposer();
  }

  function renderHeader() {
    if (state.view !== 'conversation' || !state.conv) return;
    const conv = state.conv;
    $('conversation-title').textContent = conv.title || '(untitled)';
    document.title = `${conv.title || 'Conversation'} — OpenVaala`;
    const meta = [el('span', { class: 'cwd', title: 'working directory' }, conv.cwd)];
    meta.push(el('span', {}, `agent ${conv.agent}`));
    if (state.models.length > 1) {
      const select = el(
        'select',
        {
          class: 'model-switch',
          title: 'Switch the model for the next messages',
          onchange: async (event) => {
            try {
              state.conv = await api('PATCH', `/api/conversations/${enc(conv.id)}`, { model: event.target.value });
              renderHeader();
            } catch (error) {
              showError(error);
              renderHeader();
            }
          },
        },
        state.models.map((model) => el('option', { value: model.id, selected: model.id === conv.model }, model.id)),
      );
      if (!state.models.some((model) => model.id === conv.model)) {
        select.prepend(el('option', { value: conv.model, selected: true, disabled: true }, `${conv.model} (missing)`));
      }
      meta.push(el('label', {}, 'model ', select));
    } else {
      meta.push(el('span', {}, `model ${conv.model}${conv.model === 'demo' ? ' (demo, offline)' : ''}`));
    }
    if (conv.archived) meta.push(el('span', { class: 'badge archived' }, 'archived'));
    if (conv.forked_from) {
      meta.push(
        el('a', { href: `#/c/${enc(conv.forked_from.conversation_id)}`, title: 'Open the conversation this was copied from' }, 'forked from…'),
      );
    }
    $('conversation-meta').replaceChildren(...meta);
    $('compact').disabled = conv.status === 'running';
  }

  function renderTabs() {
    const inConversation = state.view === 'conversation' && state.conv;
    $('tabs').hidden = !inConversation;
    if (!inConversation) return;
    const subAgents = state.sessions.filter((s) => s.parent_id).length;
    $('agents-count').textContent = subAgents ? String(subAgents) : '';
    $('tab-conversation').classList.toggle('selected', state.tab === 'conversation');
    $('tab-agents').classList.toggle('selected', state.tab === 'agents');
    const crumb = $('session-crumb');
    const session = state.sessions.find((s) => s.id === state.sessionId);
    const viewingSub = state.tab === 'conversation' && session && session.parent_id;
    crumb.hidden = !viewingSub;
    if (viewingSub) {
      crumb.replaceChildren(
        el('span', {}, `Viewing sub-agent “${session.agent}”`, session.task ? `: ${session.task}` : ''),
        el('span', { class: 'spacer' }),
        el('button', { type: 'button', text: 'Back to the main agent', onclick: () => showSession(state.conv.root_session_id) }),
      );
    }
  }

  function renderAgents() {
    if (state.view !== 'conversation' || state.tab !== 'agents') return;
    const rows = state.sessions.map((session) => {
      const root = !session.parent_id;
      const parent = state.sessions.find((s) => s.id === session.parent_id);
      return el(
        'li',
        { class: `agent-row status-${session.status}${session.id === state.sessionId ? ' selected' : ''}` },
        el(
          'div',
          { class: 'agent-head' },
          el('strong', {}, root ? `${session.agent} (main agent)` : session.agent),
          el('span', { class: `badge session-${session.status}` }, session.status),
          el('span', { class: 'muted' }, `model ${session.model}`),
          !root && parent ? el('span', { class: 'muted' }, `spawned by ${parent.agent}`) : null,
          el('span', { class: 'spacer' }),
          session.status === 'running' && !root
            ? el('button', {
              type: 'button',
              class: 'danger',
              text: 'Interrupt',
              onclick: () => interruptSession(session.id),
            })
            : null,
          el('button', { type: 'button', text: 'Open history', onclick: () => showSession(session.id) }),
        ),
        session.task ? el('div', { class: 'agent-task' }, el('span', { class: 'muted' }, 'Task: '), session.task) : null,
        session.last_message ? el('div', { class: 'agent-last' }, session.last_message) : null,
      );
    });
    if (state.sessions.length <= 1) {
      rows.push(el('li', { class: 'hint' }, 'No sub-agents yet. They appear here when the agent delegates work with spawn_agent.'));
    }
    $('agent-list').replaceChildren(...rows);
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

  function renderUsage() {
    const box = $('usage');
    const usage = state.usage;
    if (state.view !== 'conversation' || !usage || !usage.context_window) {
      box.hidden = true;
      return;
    }
    box.hidden = false;
    const percent = Math.max(0, Number(usage.percent) || 0);
    const fill = $('usage-fill');
    fill.style.width = `${Math.min(100, percent)}%`;
    const threshold = usage.threshold_tokens ? (usage.threshold_tokens / usage.context_window) * 100 : null;
    fill.classList.toggle('warn', threshold !== null && percent >= threshold * 0.85);
    fill.classList.toggle('full', threshold !== null && percent >= threshold);
    const marker = $('usage-threshold');
    marker.hidden = threshold === null;
    if (threshold !== null) marker.style.left = `${Math.min(100, threshold)}%`;
    $('usage-text').textContent = `context ${formatTokens(usage.used_tokens)} / ${formatTokens(usage.context_window)} (${percent.toFixed(1)}%) · ${usage.source}`;
    box.title =
      usage.source === 'reported'
        ? `${usage.used_tokens} tokens: ${usage.reported_tokens} reported by the provider for the last request + ${usage.estimated_since_report} estimated since. Compaction starts at ${usage.threshold_tokens}.`
        : `${usage.used_tokens} tokens, estimated (no recent report from the provider). Compaction starts at ${usage.threshold_tokens}.`;
  }

  function viewedSession() {
    return state.sessions.find((s) => s.id === state.sessionId) || null;
  }

  function isRunning() {
    if (state.view !== 'conversation' || !state.conv) return false;
    const session = viewedSession();
    if (session && session.parent_id) return session.status === 'running';
    return state.conv.status === 'running';
  }

  function renderComposer() {
    const running = isRunning();
    $('mode-label').hidden = !running;
    $('interrupt').hidden = !running;
    $('running-indicator').hidden = !running;
    $('send').disabled = state.send.busy;
    $('send').textContent = state.view === 'new' ? 'Start' : running ? 'Send while working' : 'Send';
  }

  function renderPending() {
    const box = $('pending');
    const pending = state.view === 'conversation' ? state.pending : [];
    box.hidden = pending.length === 0;
    if (state.pendingEdit && !pending.some((m) => m.id === state.pendingEdit.id)) state.pendingEdit = null;
    const rows = pending.map((message) => {
      const user = message.source === 'user';
      const editing = state.pendingEdit && state.pendingEdit.id === message.id;
      const target =
        state.conv && message.session_id !== state.conv.root_session_id
          ? el('span', { class: 'muted' }, `to ${sessionLabel(message.session_id)}`)
          : null;
      const head = el(
        'div',
        { class: 'pending-head' },
        el('span', { class: `badge mode-${message.mode}` }, message.mode),
        user ? null : el('span', { class: 'muted' }, `report from ${sessionLabel(message.from_session_id)}`),
        target,
        el('span', { class: 'spacer' }),
      );
      if (editing) {
        const area = el('textarea', {
          rows: 3,
          value: state.pendingEdit.value,
          oninput: (event) => {
            state.pendingEdit.value = event.target.value;
          },
        });
        head.append(
          el('button', { type: 'button', class: 'primary', text: 'Save', onclick: () => patchPending(message, { text: state.pendingEdit.value }) }),
          el('button', {
            type: 'button',
            text: 'Cancel',
            onclick: () => {
              state.pendingEdit = null;
              renderPending();
            },
          }),
        );
        return el('li', { class: 'pending-item editing' }, head, area);
      }
      if (user) {
        head.append(
          el('button', {
            type: 'button',
            text: 'Edit',
            onclick: () => {
              state.pendingEdit = { id: message.id, value: message.text, fresh: true };
              renderPending();
            },
          }),
          el('button', { type: 'button', text: 'Withdraw', title: 'Take it back into the message box', onclick: () => withdrawPending(message) }),
          // DOM `append` would write a `null` out as text: leave absent buttons out.
          ...[
            message.mode !== 'steer'
              ? el('button', { type: 'button', text: 'Steer now', title: 'Let the running turn read it before its next model call', onclick: () => patchPending(message, { mode: 'steer' }) })
              : null,
            message.mode !== 'interrupt'
              ? el('button', { type: 'button', class: 'danger', text: 'Interrupt with this', onclick: () => patchPending(message, { mode: 'interrupt' }) })
              : null,
          ].filter(Boolean),
        );
      }
      return el('li', { class: `pending-item${user ? '' : ' from-agent'}` }, head, el('div', { class: 'text' }, message.text));
    });
    const list = $('pending-list');
    const focused = list.querySelector('textarea') === document.activeElement;
    list.replaceChildren(...rows);
    const area = list.querySelector('textarea');
    if (area && (focused || state.pendingEdit.fresh)) {
      state.pendingEdit.fresh = false;
      area.focus();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Actions.
  async function patchPending(message, change) {
    try {
      await api('PATCH', `/api/conversations/${enc(state.conv.id)}/pending/${enc(message.id)}`, change);
      if (change.text !== undefined) state.pendingEdit = null;
      renderPending();
    } catch (error) {
      showError(
        error.code === 'not_waiting'
          ? new ApiError(error.status, error.code, `The agent already took that message, so it cannot be changed any more. (${error.message})`)
          : error,
      );
    }
  }

  async function withdrawPending(message) {
    try {
      const withdrawn = await api('DELETE', `/api/conversations/${enc(state.conv.id)}/pending/${enc(message.id)}`);
      const box = $('message');
      const text = (withdrawn && withdrawn.text) || message.text;
      box.value = box.value.trim() ? `${text}\n\n${box.value}` : text;
      box.focus();
    } catch (error) {
      showError(
        error.code === 'not_waiting'
          ? new ApiError(error.status, error.code, `The agent already took that message, so it cannot be withdrawn. (${error.message})`)
          : error,
      );
    }
  }

  async function send() {
    const box = $('message');
    const text = box.value;
    if (!text.trim() || state.send.busy) return;
    // One key per message: a click that is retried (after an error) sends the same key, so the
    // service does it only once; a changed text is a new message.
    if (!state.send.key || state.send.text !== text) {
      state.send.key = newKey();
      state.send.text = text;
    }
    const headers = { 'Idempotency-Key': state.send.key };
    state.send.busy = true;
    renderComposer();
    try {
      if (state.view === 'new') {
        const body = { text };
        const cwd = $('cwd').value.trim();
        if (cwd) body.cwd = cwd;
        const model = $('model-select').value;
        if (model) body.model = model;
        const created = await api('POST', '/api/conversations', body, headers);
        box.value = '';
        state.drafts.delete('new');
        state.newCwd = '';
        upsertListed(created.conversation);
        state.view = 'welcome'; // so that route() opens the new conversation
        location.hash = `#/c/${enc(created.conversation.id)}`;
      } else if (state.view === 'conversation' && state.conv) {
        const body = { text };
        if (isRunning()) body.mode = $('mode').value;
        if (state.sessionId && state.sessionId !== state.conv.root_session_id) body.session_id = state.sessionId;
        await api('POST', `/api/conversations/${enc(state.conv.id)}/messages`, body, headers);
        if (box.value === text) box.value = '';
        state.drafts.delete(state.conv.id);
      }
      state.send.key = null;
      state.send.text = null;
    } catch (error) {
      showError(error);
    } finally {
      state.send.busy = false;
      renderComposer();
    }
  }

  async function interruptSession(sessionId) {
    if (!state.conv) return;
    try {
      const path =
        sessionId && sessionId !== state.conv.root_session_id
          ? `/api/conversations/${enc(state.conv.id)}/sessions/${enc(sessionId)}/interrupt`
          : `/api/conversations/${enc(state.conv.id)}/interrupt`;
      await api('POST', path, {});
    } catch (error) {
      showError(error);
    }
  }

  async function fork() {
    if (!state.conv) return;
    try {
      const answer = await api('POST', `/api/conversations/${enc(state.conv.id)}/fork`, {});
      upsertListed(answer.conversation);
      location.hash = `#/c/${enc(answer.conversation.id)}`;
    } catch (error) {
      showError(error);
    }
  }

  async function rewind(item) {
    if (!state.conv) return;
    const source = state.conv;
    try {
      const answer = await api('POST', `/api/conversations/${enc(source.id)}/rewind`, { message_id: item.id });
      const text = answer.text !== undefined && answer.text !== null ? answer.text : item.text;
      if (answer.conversation) {
        state.drafts.set(answer.conversation.id, text);
        upsertListed(answer.conversation);
        location.hash = `#/c/${enc(answer.conversation.id)}`;
      } else {
        // Restarting from the first message copies nothing: start afresh in the same directory,
        // as a new page (Back returns to the source, whose draft is kept by `route`).
        state.drafts.set('new', text);
        state.newCwd = source.cwd;
        location.hash = '#/new';
      }
    } catch (error) {
      showError(error);
    }
  }

  async function compact() {
    if (!state.conv) return;
    const button = $('compact');
    button.disabled = true;
    try {
      await api('POST', `/api/conversations/${enc(state.conv.id)}/compact`, {});
    } catch (error) {
      if (error.code === 'messages_waiting') {
        showError(new ApiError(error.status, error.code, `Messages are waiting for the agent; compress the context once they are taken. (${error.message})`));
      } else if (error.code === 'nothing_to_compact') {
        showError(new ApiError(error.status, error.code, 'There is nothing to compress: the model already reads only the summary and what came after it.'));
      } else {
        showError(error);
      }
    } finally {
      button.disabled = !state.conv || state.conv.status === 'running';
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Wiring.
  function wire() {
    $('new-conversation').addEventListener('click', () => {
      if (location.hash === '#/new') {
        if (state.view !== 'new') openNew();
        else $('message').focus();
      } else {
        location.hash = '#/new';
      }
    });
    $('search').addEventListener(
      'input',
      debounce((event) => {
        state.list.q = event.target.value.trim();
        state.list.nextCursor = null;
        loadList(false);
      }, 250),
    );
    const setArchivedFilter = (archived) => {
      state.list.archived = archived;
      state.list.nextCursor = null;
      $('show-active').classList.toggle('selected', !archived);
      $('show-archived').classList.toggle('selected', archived);
      $('show-active').setAttribute('aria-pressed', String(!archived));
      $('show-archived').setAttribute('aria-pressed', String(archived));
      state.list.conversations = [];
      state.list.loaded = false;
      renderList();
      loadList(false);
    };
    $('show-active').addEventListener('click', () => setArchivedFilter(false));
    $('show-archived').addEventListener('click', () => setArchivedFilter(true));
    $('load-more').addEventListener('click', () => loadList(true));
    $('composer').addEventListener('submit', (event) => {
      event.preventDefault();
      send();
    });
    $('message').addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing && !event.altKey) {
        event.preventDefault();
        send();
      }
    });
    $('interrupt').addEventListener('click', () => interruptSession(state.sessionId));
    $('fork').addEventListener('click', fork);
    $('compact').addEventListener('click', compact);
    $('tab-conversation').addEventListener('click', () => {
      state.tab = 'conversation';
      render();
    });
    $('tab-agents').addEventListener('click', () => {
      state.tab = 'agents';
      render();
    });
    $('sidebar-open').addEventListener('click', () => document.body.classList.add('sidebar-open'));
    $('sidebar-close').addEventListener('click', () => document.body.classList.remove('sidebar-open'));
    // On a narrow screen, a tap beside the sliding list closes it.
    $('main').addEventListener('click', (event) => {
      if (document.body.classList.contains('sidebar-open') && !event.target.closest('#sidebar-open')) {
        document.body.classList.remove('sidebar-open');
      }
    });
    window.addEventListener('hashchange', route);
    // Relative times in the sidebar age.
    setInterval(() => {
      if (!state.list.renaming) renderList();
    }, 60000);
  }

  async function loadModels() {
    try {
      const answer = await api('GET', '/api/models');
      state.models = answer.models || [];
      const select = $('model-select');
      select.replaceChildren(
        el('option', { value: '' }, `agent's default${page.defaultModel ? ` (${page.defaultModel})` : ''}`),
        ...state.models.map((model) => el('option', { value: model.id }, model.id)),
      );
      select.closest('label').hidden = state.models.length <= 1;
      renderHeader();
    } catch (error) {
      showError(error);
    }
  }

  wire();
  watchTimeline();
  openListStream();
  loadModels();
  route();
  // If the list stream cannot connect, still show the list.
  setTimeout(() => {
    if (!state.list.loaded) loadList(false);
  }, 3000);
})();
