// What the main area shows for the current view: the new-conversation composer (also the
// landing page), a conversation (its timeline or its Agents tab), why a conversation cannot
// open, the remembered rules, or the signed-in devices and tokens. Each part renders itself from the state; this only decides which parts are visible, and
// says what the view is doing in attributes of #main (renderViewState).

import { $ } from './dom.js';
import { isRunning, state } from './state.js';
import { renderHeader, renderTabs } from './header.js';
import { renderAgents } from './agents.js';
import { renderPending } from './pending.js';
import { renderUsage } from './meter.js';
import { renderComposer } from './composer.js';
import { resetScroll } from './scroll.js';
import { renderProcesses } from './processes.js';

export function render() {
  const view = state.view;
  const inConversation = view === 'conversation';
  const showAgents = inConversation && state.tab === 'agents';
  $('intro').hidden = view !== 'new';
  $('blocked').hidden = view !== 'blocked';
  $('rules-view').hidden = view !== 'rules';
  $('devices-view').hidden = view !== 'devices';
  for (const [link, shown] of [
    ['rules-link', 'rules'],
    ['devices-link', 'devices'],
  ]) {
    if (view === shown) $(link).setAttribute('aria-current', 'page');
    else $(link).removeAttribute('aria-current');
  }
  $('conversation-panel').hidden = !(view === 'new' || (inConversation && !showAgents));
  $('timeline-area').hidden = !inConversation;
  $('agents').hidden = !showAgents;
  $('new-fields').hidden = view !== 'new';
  if (!inConversation) resetScroll();
  renderHeader();
  renderTabs();
  renderAgents();
  renderPending();
  renderUsage();
  renderComposer();
  renderProcesses();
  // The tabs and the meter share a line, shown when either is.
  document.querySelector('.subheader').hidden = $('tabs').hidden && $('usage').hidden;
  renderViewState();
}

// What the view is doing, for tests and tools that must know it without reading the words on
// the page. data-view is the view shown: "new", "conversation", "blocked", "rules" or "devices". In a conversation,
// data-state is "loading" until the conversation and its history are on the page (and again
// while a fresh snapshot replaces them), then "running" while the session shown works (the
// composer says the agent is working) and "idle" when it does not. Called wherever the page
// decides what to show: with every render, and when a live update changes whether it works.
export function renderViewState() {
  const main = $('main');
  main.dataset.view = state.view;
  if (state.view !== 'conversation') delete main.dataset.state;
  else if (!state.conv || !state.historyShown || state.loadingItems) main.dataset.state = 'loading';
  else main.dataset.state = isRunning() ? 'running' : 'idle';
}
