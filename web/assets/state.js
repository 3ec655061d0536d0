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
  view: 'new', // 'new' (the composer of a new conversation, also the landing page) | 'conversation' | 'blocked' | 'rules'
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

// A session by its agent's name; sub-agents of one agent are numbered in the order they were
// started (“default” #2), so that several are told apart everywhere.
export function sessionLabel(sessionId) {
  const session = state.sessions.find((s) => s.id === sessionId);
  if (!session) return sessionId || '';
  if (!session.parent_id) return `“${session.agent}”`;
  const same = state.sessions
    .filter((s) => s.parent_id && s.agent === session.agent)
    .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0));
  return same.length > 1 ? `“${session.agent}” #${same.indexOf(session) + 1}` : `“${session.agent}”`;
}

// A sub-agent by its agent and its task's first line, cut to a glance (“helper”: count the
// files): several sub-agents of one agent are told apart by what they were asked.
export function subAgentName(sessionId) {
  const session = state.sessions.find((s) => s.id === sessionId);
  const first = ((session && session.task) || '').split('\n')[0].trim();
  if (!first) return sessionLabel(sessionId);
  return `${sessionLabel(sessionId)}: ${first.length > 60 ? `${first.slice(0, 59)}…` : first}`;
}

// The approvals waiting for an answer that `match` picks, oldest first.
export function pendingApprovals(match) {
  return [...state.approvals.values()].filter(match).sort((a, b) => (a.created_at < b.created_at ? -1 : 1));
}
