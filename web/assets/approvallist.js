// The approvals waiting for an answer in every conversation (`state.approvals`): loaded at
// start and whenever the list stream starts over, then kept by `approval.requested` and
// `approval.resolved` from either stream. The sidebar marks the conversations that wait, the
// Agents tab the agents; the cards themselves are approvals.js's.

import { api } from './api.js';
import { isUnreachable, whenBack } from './reconnect.js';
import { state } from './state.js';
import { renderList } from './sidebar.js';
import { renderAgents } from './agents.js';
import { renderTabs } from './header.js';

function changed() {
  renderList();
  renderTabs();
  renderAgents();
}

export function noteRequested(approval) {
  if (state.settledApprovals.has(approval.id) || approval.status !== 'pending') return;
  state.approvals.set(approval.id, approval);
  changed();
}

export function noteResolved(approval) {
  state.settledApprovals.add(approval.id);
  if (state.approvals.delete(approval.id)) changed();
}

// What a conversation's snapshot says waits there now: the whole truth for that conversation.
export function noteConversationApprovals(conversationId, approvals) {
  for (const [id, approval] of state.approvals) {
    if (approval.conversation_id === conversationId && !approvals.some((a) => a.id === id)) state.approvals.delete(id);
  }
  for (const approval of approvals) {
    if (!state.settledApprovals.has(approval.id)) state.approvals.set(approval.id, approval);
  }
  changed();
}

let loads = 0;

// GET /api/approvals. An approval asked while the answer was on its way stays; one that was
// known before and is not in the answer was settled meanwhile (an event the page missed).
export async function loadApprovals() {
  const load = ++loads;
  const before = new Set(state.approvals.keys());
  let answer;
  try {
    answer = await api('GET', '/api/approvals?status=pending');
  } catch (error) {
    // The streams' events still keep the marks; the next list snapshot loads again, and so
    // does the service's coming back when it did not answer (the page opened offline).
    if (isUnreachable(error)) whenBack('approvals', loadApprovals);
    return;
  }
  if (load !== loads) return;
  const listed = new Set(answer.approvals.map((approval) => approval.id));
  for (const id of before) if (!listed.has(id)) state.approvals.delete(id);
  for (const approval of answer.approvals) {
    if (!state.settledApprovals.has(approval.id)) state.approvals.set(approval.id, approval);
  }
  changed();
}

// The list stream (`/api/events`) tells of every conversation's approvals; after the first
// snapshot, a snapshot means the stream started over and may have missed some.
export function followApprovals(stream) {
  let snapshots = 0;
  stream.addEventListener('snapshot', () => {
    if (snapshots++ > 0) loadApprovals();
  });
  stream.addEventListener('approval.requested', (event) => noteRequested(JSON.parse(event.data).approval));
  stream.addEventListener('approval.resolved', (event) => noteResolved(JSON.parse(event.data).approval));
}
