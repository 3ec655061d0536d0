// The Agents tab: the conversation's agents as a tree (the main agent, then the sub-agents it and
// they spawned), each with its status, agent, model, task and last message, and whether it waits
// for the user's approval (what it asks to run). One can be opened (its history streams in the
// timeline, where its approval card is), messaged or interrupted. With no sub-agents the tab
// says so plainly.

import { api } from './api.js';
import { $, el, enc } from './dom.js';
import { markInvisible } from './visible.js';
import { renderMarkdown } from './markdown.js';
import { nameHoldsTask, pendingApprovals, state, subAgentName } from './state.js';
import { toolTitle } from './toolcards.js';
import { focusApproval } from './approvals.js';
import { interruptSession } from './actions.js';
import { renderTabs } from './header.js';
import { refreshSkills } from './skills.js';
import { isQuestion, isSampling, serverName } from './mcpasks.js';

const STATUS_TEXT = { running: 'working', idle: 'idle', interrupted: 'interrupted', closed: 'closed' };

// Sessions in tree order: each followed by its children.
function treeOrder(sessions) {
  const children = new Map();
  for (const session of sessions) {
    const key = session.parent_id || null;
    if (!children.has(key)) children.set(key, []);
    children.get(key).push(session);
  }
  const ordered = [];
  const visit = (parent, depth) => {
    for (const session of children.get(parent) || []) {
      ordered.push({ session, depth });
      visit(session.id, depth + 1);
    }
  };
  visit(null, 0);
  // A session whose parent is unknown (not listed yet) still shows.
  for (const session of sessions) if (!ordered.some((o) => o.session === session)) ordered.push({ session, depth: 1 });
  return ordered;
}

function openSession(sessionId, focusComposer) {
  document.dispatchEvent(new CustomEvent('show-session', { detail: sessionId }));
  if (focusComposer) $('message').focus();
}

// What the agent waits for the user to allow: each call, and the way to its card.
function waitingApprovals(session, approvals) {
  if (!approvals.length) return null;
  return el(
    'div',
    { class: 'agent-approvals' },
    approvals.map((approval) => {
      const subject = approval.subject || {};
      // Marked as on its card: an invisible character must not hide here either.
      const what = isQuestion(approval)
        ? markInvisible((approval.question && approval.question.message) || '').nodes
        : isSampling(approval)
          ? markInvisible(((subject.arguments && subject.arguments.messages) || []).map((message) => message.text).join(' / ')).nodes
          : markInvisible(subject.command !== undefined && subject.command !== null ? `$ ${subject.command}` : subject.path || JSON.stringify(subject.arguments || {})).nodes;
      const lead = isQuestion(approval)
        ? `The MCP server ${serverName(approval)} asks: `
        : isSampling(approval)
          ? `The MCP server ${serverName(approval)} asks to use the model: `
          : approval.escalate
            ? `Asks to run outside the sandbox (${toolTitle(approval.tool)}): `
            : `Asks to run (${toolTitle(approval.tool)}): `;
      return el(
        'div',
        { class: 'agent-approval', 'data-approval': approval.id },
        el('span', {}, lead),
        el('code', {}, what),
        el('button', {
          type: 'button',
          text: 'Answer',
          title: 'Show its approval card in its history',
          onclick: () => {
            openSession(session.id, false);
            focusApproval(approval.id);
          },
        }),
      );
    }),
  );
}

// The last message as the agent wrote it (Markdown), cut to a few lines.
function lastMessage(text) {
  const body = el('div', { class: 'md agent-last-text' });
  renderMarkdown(body, text);
  return el('div', { class: 'agent-last' }, el('span', { class: 'muted' }, 'Last message'), body);
}

export function renderAgents() {
  if (state.view !== 'conversation' || state.tab !== 'agents') return;
  const subAgents = state.sessions.filter((s) => s.parent_id);
  const rows = treeOrder(state.sessions).map(({ session, depth }) => {
    const root = !session.parent_id;
    const status = session.status || 'idle';
    const approvals = pendingApprovals((a) => state.conv && a.conversation_id === state.conv.id && a.session_id === session.id);
    return el(
      'li',
      { class: `agent-row status-${status}${session.id === state.sessionId ? ' selected' : ''}`, 'data-session': session.id, 'data-depth': Math.min(depth, 4) },
      el(
        'div',
        { class: 'agent-head' },
        el('strong', { class: 'agent-name' }, subAgentName(session.id)),
        el('span', { class: `badge session-${status}` }, STATUS_TEXT[status] || status),
        approvals.length ? el('span', { class: 'badge session-approval' }, 'waits for your approval') : null,
        el('span', { class: 'muted' }, `model ${session.model}`),
        el('span', { class: 'spacer' }),
        !root && status === 'running'
          ? el('button', { type: 'button', class: 'danger', text: 'Interrupt', onclick: () => interruptSession(session.id) })
          : null,
        !root ? el('button', { type: 'button', text: 'Message', onclick: () => openSession(session.id, true) }) : null,
        el('button', { type: 'button', text: root ? 'Open conversation' : 'Open', onclick: () => openSession(session.id, false) }),
      ),
      // The whole task, when the name shows only its first words.
      session.task && !nameHoldsTask(session) ? el('div', { class: 'agent-task' }, el('span', { class: 'muted' }, 'Task: '), session.task) : null,
      waitingApprovals(session, approvals),
      session.last_message ? lastMessage(session.last_message) : null,
    );
  });
  $('agent-list').replaceChildren(...rows);
  $('agents-empty').hidden = subAgents.length > 0;
  refreshSkills();
}

// The list as the service has it now (the stream keeps it current afterwards).
export async function refreshSessions() {
  if (!state.conv) return;
  const gen = state.gen;
  try {
    const answer = await api('GET', `/api/conversations/${enc(state.conv.id)}/sessions`);
    if (gen !== state.gen || !answer || !Array.isArray(answer.sessions)) return;
    state.sessions = answer.sessions;
    renderTabs();
    renderAgents();
  } catch {
    // The stream's snapshot already gave a list; a failed refresh changes nothing.
  }
}
