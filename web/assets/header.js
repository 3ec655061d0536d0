// The conversation's header: its title, where it works (directory, agent, model; a fork into a
// copy of the tree is marked), the source it was forked from (by title, as a link), its actions
// (the fork's menu also forks into a worktree), and the Conversation / Agents tabs. On a
// phone the header is one line: the details and actions move into the "⋯" menu.

import { api, isReadOnly } from './api.js';
import { $, el, enc } from './dom.js';
import { showError } from './banners.js';
import { openMenu } from './menu.js';
import { navigate, state, subAgentName } from './state.js';
import { exportConversation, fork, forkIntoWorktree } from './actions.js';
import { compact } from './compaction.js';
import { conversationTitle } from './titles.js';
import { setTitle } from './attention.js';
import { worktreeMark } from './worktrees.js';

function forkedFromLink(conv) {
  const sourceId = conv.forked_from.conversation_id;
  const link = el('a', { class: 'forked-from', href: `#/c/${enc(sourceId)}` }, 'forked from …');
  conversationTitle(sourceId).then((title) => {
    if (title === null) link.replaceWith(el('span', { class: 'forked-from' }, 'forked from a conversation that was deleted'));
    else link.textContent = `forked from “${title === undefined ? sourceId : title}”`;
  });
  return link;
}

export function renderHeader() {
  const view = state.view;
  const actions = $('conversation-actions');
  $('header-menu').hidden = !(view === 'conversation' && state.conv);
  actions.hidden = $('header-menu').hidden;
  if (view === 'rules') {
    $('conversation-title').textContent = 'Remembered rules';
    $('conversation-meta').replaceChildren(el('span', {}, 'Kept from answers to approvals'));
    setTitle('Remembered rules — OpenVaala');
    return;
  }
  if (view === 'devices') {
    $('conversation-title').textContent = 'Devices and tokens';
    $('conversation-meta').replaceChildren(el('span', {}, 'Who may use this service'));
    setTitle('Devices and tokens — OpenVaala');
    return;
  }
  if (view === 'new') {
    $('conversation-title').textContent = 'New conversation';
    $('conversation-meta').replaceChildren(el('span', {}, 'Nothing is stored until you send the first message.'));
    setTitle('OpenVaala');
    return;
  }
  if (view !== 'conversation' || !state.conv) return;
  const conv = state.conv;
  $('conversation-title').textContent = conv.title || '(untitled)';
  setTitle(`${conv.title || 'Conversation'} — OpenVaala`);
  // A fork into a copy of the tree works in that copy: the mark says so, with its directory.
  const where = worktreeMark(conv, 60) || el('span', { class: 'cwd', title: 'Working directory' }, conv.cwd);
  const meta = [where, el('span', {}, `agent ${conv.agent}`)];
  if (state.models.length > 1) {
    const select = el(
      'select',
      {
        class: 'model-switch',
        'aria-label': 'Model',
        title: isReadOnly() ? 'This device may only read' : 'Switch the model for the next messages',
        disabled: isReadOnly(),
        onchange: async (event) => {
          try {
            state.conv = await api('PATCH', `/api/conversations/${enc(conv.id)}`, { model: event.target.value });
          } catch (error) {
            showError(error);
          }
          renderHeader();
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
  if (typeof state.cost === 'number') meta.push(el('span', { class: 'conversation-cost', title: "What this conversation's turns cost at the models' prices" }, `cost ${state.cost.toFixed(state.cost >= 1 ? 2 : 4)}`));
  if (conv.archived) meta.push(el('span', { class: 'badge archived' }, 'archived'));
  if (conv.forked_from) meta.push(forkedFromLink(conv));
  $('conversation-meta').replaceChildren(...meta);
  // While it compresses, the button says so, and a press does nothing (it stays focusable).
  const compress = $('compact');
  compress.disabled = conv.status === 'running';
  compress.textContent = state.compacting ? 'Compressing…' : 'Compress context';
  compress.setAttribute('aria-disabled', String(state.compacting));
}

export function renderTabs() {
  const inConversation = state.view === 'conversation' && !!state.conv;
  $('tabs').hidden = !inConversation;
  if (!inConversation) return;
  const subAgents = state.sessions.filter((s) => s.parent_id).length;
  $('agents-count').textContent = subAgents ? String(subAgents) : '';
  for (const [id, tab] of [
    ['tab-conversation', 'conversation'],
    ['tab-agents', 'agents'],
  ]) {
    const selected = state.tab === tab;
    $(id).setAttribute('aria-selected', String(selected));
    $(id).tabIndex = selected ? 0 : -1;
  }
  const crumb = $('session-crumb');
  const session = state.sessions.find((s) => s.id === state.sessionId);
  const viewingSub = state.tab === 'conversation' && session && session.parent_id;
  crumb.hidden = !viewingSub;
  if (viewingSub) {
    crumb.replaceChildren(
      el('span', { title: session.task || null }, `Viewing sub-agent ${subAgentName(session.id)}`),
      el('span', { class: 'spacer' }),
      el('button', {
        type: 'button',
        text: 'Back to the main agent',
        onclick: () => document.dispatchEvent(new CustomEvent('show-session', { detail: state.conv.root_session_id })),
      }),
    );
  }
}

// The two ways to fork, for the fork menu and the phone's menu.
function forkItems() {
  const readOnly = isReadOnly();
  return [
    { label: 'Fork', hint: 'The copy works in the same directory', run: fork, disabled: readOnly },
    { label: 'Fork into a worktree', hint: 'The copy works in its own copy of the files (a git worktree in a repository)', run: forkIntoWorktree, disabled: readOnly },
  ];
}

// "Fork" forks at once; the "▾" beside it opens the fork menu, which also forks into a copy of
// the working tree.
function wireForkMenu() {
  const forkButton = $('fork');
  forkButton.addEventListener('click', fork);
  const more = el('button', {
    type: 'button',
    id: 'fork-menu',
    class: 'split-more',
    'aria-haspopup': 'menu',
    'aria-expanded': 'false',
    'aria-label': 'More ways to fork',
    title: 'Fork into a copy of the working tree, or in the same directory',
    text: '▾',
    onclick: () => openMenu(more, forkItems(), 'Fork'),
  });
  const group = el('span', { class: 'split-button', role: 'group', 'aria-label': 'Fork' });
  forkButton.replaceWith(group);
  group.append(forkButton, more);
}

export function wireHeader(render) {
  wireForkMenu();
  $('export').addEventListener('click', exportConversation);
  $('compact').addEventListener('click', () => compact(renderHeader));
  const selectTab = (tab, focus) => {
    state.tab = tab;
    render();
    if (focus) $(`tab-${tab}`).focus();
  };
  $('tab-conversation').addEventListener('click', () => selectTab('conversation'));
  $('tab-agents').addEventListener('click', () => selectTab('agents'));
  $('tabs').addEventListener('keydown', (event) => {
    if (!['ArrowLeft', 'ArrowRight', 'Home', 'End'].includes(event.key)) return;
    event.preventDefault();
    const next = event.key === 'Home' ? 'conversation' : event.key === 'End' ? 'agents' : state.tab === 'agents' ? 'conversation' : 'agents';
    selectTab(next, true);
  });
  $('header-menu').addEventListener('click', () => {
    const conv = state.conv;
    if (!conv) return;
    const items = [
      ...forkItems(),
      { label: 'Export as Markdown', run: exportConversation },
      { label: state.compacting ? 'Compressing…' : 'Compress context', run: () => compact(renderHeader), disabled: conv.status === 'running' || state.compacting || isReadOnly() },
      // The details line (directory, agent, model) does not fit a phone's one-line header.
      {
        label: document.body.classList.contains('show-meta') ? 'Hide details' : 'Show details',
        run: () => document.body.classList.toggle('show-meta'),
      },
    ];
    if (conv.forked_from) {
      const sourceId = conv.forked_from.conversation_id;
      const title = state.titles.get(sourceId);
      items.push({ label: `Open the original${title ? `: “${title}”` : ''}`, run: () => navigate(`#/c/${enc(sourceId)}`) });
    }
    openMenu($('header-menu'), items, 'Conversation actions');
  });
}
