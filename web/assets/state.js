// The page's state, shared by the modules. `view` is what the main area shows; `conv` the open
// conversation and everything its live stream keeps current. Only the modules change it; the
// render functions read it.

export const state = {
  list: {
    archived: false,
    q: '',
    conversations: [],
    // With a search: by conversation id, the text around the first match in its messages.
    snippets: new Map(),
    nextCursor: null,
    request: 0,
    renaming: null,
    renameValue: '',
    loaded: false,
  },
  view: 'new', // 'new' (the composer of a new conversation, also the landing page) | 'conversation' | 'blocked' | 'rules' | 'devices'
  gen: 0, // bumped whenever the open conversation changes: late answers for an old one are dropped
  conv: null,
  sessions: [],
  pending: [],
  usage: null,
  sessionId: null, // the session shown in the timeline: the root agent's, or a sub-agent's
  tab: 'conversation',
  stream: null,
  compacting: false, // the open conversation's context is being compressed (its root session)
  loadingItems: false,
  historyShown: false, // the open conversation's history is on the page (a snapshot was applied)
  itemsLoad: 0,
  queued: [],
  send: { busy: false, failed: null }, // failed: { text, key } of the last send that did not go through
  drafts: new Map(), // conversation id (or 'new') → unsent composer text
  models: [],
  newCwd: '',
  titles: new Map(), // conversation id → title, for "forked from" links
  arrival: null, // { id, kind, source } after a fork or rewind: the copy's notice, shown once it opens
  approvals: new Map(), // approval id → an approval waiting for an answer, in any conversation
  settledApprovals: new Set(), // ids seen settled: a late list must not bring them back
};

// The conversation the address names (#/c/<id>), if any.
export function routeConversationId() {
  const match = /^#\/c\/([^/]+)/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

// Going somewhere from code: the address changes and the view follows at once. 'hashchange'
// comes later, asynchronously, and keys typed meanwhile would land in the old view; the router
// (main.js) ignores the event for a hash it has already shown.
let router = () => {};

export function setRouter(route) {
  router = route;
}

export function navigate(hash) {
  location.hash = hash;
  router();
}

function viewedSession() {
  return state.sessions.find((s) => s.id === state.sessionId) || null;
}

// Whether the session shown is working now.
export function isRunning() {
  if (state.view !== 'conversation' || !state.conv) return false;
  const session = viewedSession();
  if (session && session.parent_id) return session.status === 'running';
  return state.conv.status === 'running';
}

// Sub-agents are named one way everywhere: their agent's name, their number among the
// sub-agents of that agent (in the order they started) and their task's first words —
// “reviewer #2 · Check the parser” — never their session id. The main agent is “default (main
// agent)”.

// The first words of a task: its first line that has text, cut at a word near `max` characters.
export function firstWords(task, max = 40) {
  const line = String(task || '').split('\n').map((l) => l.trim()).find(Boolean) || '';
  if (line.length <= max) return line;
  const cut = line.slice(0, max);
  const space = cut.lastIndexOf(' ');
  return `${(space > max / 2 ? cut.slice(0, space) : cut).replace(/[\s,.;:–—-]+$/, '')}…`;
}

// A sub-agent's number among the sub-agents of its agent, from 1.
function agentNumber(session) {
  const same = state.sessions
    .filter((s) => s.parent_id && s.agent === session.agent)
    .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1));
  return same.indexOf(session) + 1;
}

// The name of the agent of a session (a sub-agent's, or the main agent's).
export function subAgentName(sessionId) {
  const session = state.sessions.find((s) => s.id === sessionId);
  if (!session) return '(not listed)';
  if (!session.parent_id) return `${session.agent} (main agent)`;
  const words = firstWords(session.task);
  return `${session.agent} #${agentNumber(session)}${words ? ` · ${words}` : ''}`;
}

// A text the service wrote (a sub-agent's report: "Report from sub-agent `reviewer` (s_…): …")
// with the session ids it holds replaced by the sub-agents' names.
export function withNames(text) {
  let named = String(text || '');
  if (!named.includes('s_')) return named;
  for (const session of state.sessions) {
    if (!named.includes(session.id)) continue;
    const name = subAgentName(session.id);
    // "`reviewer` (s_…)" is the agent's name and its id: the whole is the name.
    for (const both of [`\`${session.agent}\` (${session.id})`, `${session.agent} (${session.id})`, session.id]) named = named.split(both).join(name);
  }
  return named;
}

// Whether the name shows the whole task (else the task is shown beside it).
export function nameHoldsTask(session) {
  return firstWords(session.task) === String(session.task || '').trim();
}

// The approvals waiting for an answer that `match` picks, oldest first.
export function pendingApprovals(match) {
  return [...state.approvals.values()].filter(match).sort((a, b) => (a.created_at < b.created_at ? -1 : 1));
}
