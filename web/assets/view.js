// What the main area shows for the current view: the new-conversation composer (also the
// landing page), a conversation (its timeline or its Agents tab), or why a conversation cannot
// open. Each part renders itself from the state; this only decides which parts are visible.

import { $ } from './dom.js';
import { state } from './state.js';
import { renderHeader, renderTabs } from './header.js';
import { renderAgents } from './agents.js';
import { renderPending } from './pending.js';
import { renderUsage } from './meter.js';
import { renderComposer } from './composer.js';

export function render() {
  const view = state.view;
  const inConversation = view === 'conversation';
  const showAgents = inConversation && state.tab === 'agents';
  $('intro').hidden = view !== 'new';
  $('blocked').hidden = view !== 'blocked';
  $('conversation-panel').hidden = !(view === 'new' || (inConversation && !showAgents));
  $('timeline').hidden = !inConversation;
  $('agents').hidden = !showAgents;
  $('new-fields').hidden = view !== 'new';
  if (!inConversation) $('new-output').hidden = true;
  renderHeader();
  renderTabs();
  renderAgents();
  renderPending();
  renderUsage();
  renderComposer();
  // The tabs and the meter share a line, shown when either is.
  document.querySelector('.subheader').hidden = $('tabs').hidden && $('usage').hidden;
}
