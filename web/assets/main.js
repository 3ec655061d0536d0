// The web UI's entry: a plain client of the public HTTP + SSE API (described by
// /api/openapi.json), in native ES modules with no build step. It wires the page, routes
// (#/c/<id> opens a conversation, #/rules the remembered rules, #/devices the signed-in devices
// and tokens; anything else is the message box of a new one, ready to type in) and holds the
// global keys: Esc interrupts a running turn, Ctrl+Shift+O (⌘⇧O) starts a new conversation, ?
// lists the shortcuts (keys.js) (Alt+A and Alt+D in the message box, which answer an approval,
// are approvals.js's).
//
// At start it asks the service who this page is (`GET /api/session`): refused, the sign-in
// view (signin.js) is all it shows; a device that may only read gets a page that offers no
// change (`body.read-only`). Once loaded, it registers the service worker that lets the page
// open offline and shows pushes (serviceworker.js).

import { api, isReadOnly, loadSession } from './api.js';
import { $, el, enc } from './dom.js';
import { clearNoticesExcept, showError, showNotice } from './banners.js';
import { isRunning, navigate, routeConversationId, setRouter, state } from './state.js';
import { closeMenu, isMenuOpen } from './menu.js';
import { loadList, openListStream, renderList, wireSidebar } from './sidebar.js';
import { closeConversation, openConversation } from './conversation.js';
import { fillModels, restoreDraft, saveDraft, wireComposer } from './composer.js';
import { renderHeader, wireHeader } from './header.js';
import { refreshSessions } from './agents.js';
import { interruptSession } from './actions.js';
import { watchTimeline } from './scroll.js';
import { watchAttention } from './attention.js';
import { render } from './view.js';
import { followApprovals, loadApprovals } from './approvallist.js';
import { followRules, openRules } from './rules.js';
import { wireApprovalKeys } from './approvals.js';
import { wirePlan } from './plan.js';
import { followProcesses, wireProcesses } from './processes.js';
import { makeTimelineFocusable, wireShortcutHelp } from './keys.js';
import { isUnreachable, whenBack } from './reconnect.js';
import { registerServiceWorker } from './serviceworker.js';
import { openDevices } from './devices.js';
import { wireSignIn } from './signin.js';
import { followNotifySwitch } from './push.js';

// The hash last routed: navigate() routes at once, and the 'hashchange' that follows must not
// open the view a second time (it would move what was typed meanwhile).
let routedHash = null;

function route() {
  if (location.hash === routedHash) return;
  routedHash = location.hash;
  saveDraft();
  document.body.classList.remove('sidebar-open');
  closeMenu(false);
  const id = routeConversationId();
  if (location.hash === '#/rules') {
    closeConversation();
    clearNoticesExcept('rules');
    openRules();
  } else if (location.hash === '#/devices') {
    closeConversation();
    clearNoticesExcept('devices');
    openDevices();
  } else if (id) {
    if (!state.conv || state.conv.id !== id || state.view !== 'conversation') openConversation(id);
  } else {
    openNew();
  }
  renderList();
}

function openNew() {
  closeConversation();
  state.view = 'new';
  clearNoticesExcept('new');
  $('cwd').value = state.newCwd || '';
  restoreDraft('new');
  render();
  const arrival = state.arrival;
  if (arrival && arrival.id === 'new') {
    state.arrival = null;
    showNotice(
      [
        el('a', { href: `#/c/${enc(arrival.source.id)}` }, `“${arrival.source.title}”`),
        ' started with this message, so there was nothing to copy: it is in the box of a new conversation, to edit and send. The original is unchanged.',
      ],
      { key: 'arrival', conversationId: 'new' },
    );
  }
  $('message').focus();
}

function newConversation() {
  if (location.hash === '#/new' || location.hash === '' || location.hash === '#') {
    saveDraft();
    openNew();
    renderList();
  } else {
    navigate('#/new');
  }
}

function interruptShown() {
  return interruptSession(state.sessionId);
}

function wireKeys() {
  document.addEventListener('keydown', (event) => {
    const key = event.key.toLowerCase();
    if ((event.ctrlKey || event.metaKey) && event.shiftKey && key === 'o') {
      event.preventDefault();
      newConversation();
      return;
    }
    if (event.key !== 'Escape' || event.defaultPrevented) return;
    // Esc in a dialog closes the dialog, nothing more.
    if (document.querySelector('dialog[open]')) return;
    if (isMenuOpen()) {
      closeMenu(true);
      return;
    }
    if (document.body.classList.contains('sidebar-open')) {
      document.body.classList.remove('sidebar-open');
      $('sidebar-open').focus();
      return;
    }
    // Esc in a search box clears the search, nothing more.
    if (event.target.matches && event.target.matches('input[type="search"]') && event.target.value) return;
    if (isRunning()) {
      event.preventDefault();
      interruptShown();
    }
  });
}

function wire() {
  wireSidebar();
  wireComposer(interruptShown);
  wireHeader(() => {
    render();
    if (state.tab === 'agents') refreshSessions();
  });
  wireKeys();
  wireShortcutHelp();
  makeTimelineFocusable();
  wireApprovalKeys();
  wirePlan();
  wireProcesses();
  $('new-conversation').addEventListener('click', newConversation);
  $('sidebar-open').addEventListener('click', () => {
    document.body.classList.add('sidebar-open');
    const first = $('conversation-list').querySelector('a.conv-link[tabindex="0"]') || $('new-conversation');
    first.focus();
  });
  $('sidebar-close').addEventListener('click', () => {
    document.body.classList.remove('sidebar-open');
    $('sidebar-open').focus();
  });
  $('sidebar-scrim').addEventListener('click', () => document.body.classList.remove('sidebar-open'));
  setRouter(route);
  window.addEventListener('hashchange', route);
}

async function loadModels() {
  try {
    const answer = await api('GET', '/api/models');
    state.models = answer.models || [];
    fillModels();
    renderHeader();
  } catch (error) {
    showError(error);
    if (isUnreachable(error)) whenBack('models', loadModels);
  }
}

// What this page may do, shown: a device that may only read offers no change.
function applySession() {
  const readOnly = isReadOnly();
  document.body.classList.toggle('read-only', readOnly);
  $('read-only-note').hidden = !readOnly;
  $('new-conversation').disabled = readOnly;
  $('new-conversation').title = readOnly ? 'This device may only read: it cannot start a conversation' : 'New conversation (Ctrl+Shift+O)';
  render();
}

// The page is wired and shows its view at once, so what is typed right after it opens lands in
// the message box; what follows the service waits until it said who this page is (a page it
// refuses gets the sign-in view, signin.js, and asks nothing more). Without an answer (the
// service stopped, the page opened from the worker's copy) the page follows anyway and asks
// again once the service is back.
function start() {
  wireSignIn();
  wire();
  watchTimeline();
  watchAttention();
  route();
  registerServiceWorker();
  loadSession().then(
    () => {
      applySession();
      follow();
      followNotifySwitch();
    },
    (error) => {
      if (error.status === 401) return;
      follow();
      whenBack('session', () => loadSession().then(applySession, () => {}));
    },
  );
}

function follow() {
  const listStream = openListStream();
  followApprovals(listStream);
  followRules(listStream);
  followProcesses(listStream);
  loadApprovals();
  loadModels();
  // If the list stream cannot connect, still show the list.
  setTimeout(() => {
    if (!state.list.loaded) loadList(false);
  }, 3000);
}

start();
