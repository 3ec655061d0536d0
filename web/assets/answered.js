// The approvals this browser answered, so an outcome can say "by you (this browser)" rather than
// "by the web UI", which every browser signed in to the web UI is to the service. Kept in
// localStorage: another tab of this browser, or this one after a reload, still knows.
//
// An answer is noted before it is sent, with its decision: the stream's `approval.resolved`
// may come before the answer's own reply. An outcome is ours only when the web UI decided it,
// and decided what this browser sent; an answer that failed or came second is forgotten. Each
// page forgets only its own notes: two tabs may answer one approval, and the first one's stands.

const KEY = 'openvaala.answered';
// The newest answers kept: enough for every approval a page still shows.
const KEPT = 200;
// This page, among the tabs that share the notes.
const PAGE = Math.random().toString(36).slice(2);

function read() {
  try {
    const stored = JSON.parse(localStorage.getItem(KEY) || '[]');
    return Array.isArray(stored) ? stored : [];
  } catch {
    return [];
  }
}

function write(entries) {
  try {
    localStorage.setItem(KEY, JSON.stringify(entries.slice(-KEPT)));
  } catch {
    // Storage is full or refused: outcomes then name the web UI, which is still true.
  }
}

export function noteAnswering(id, decision) {
  write([...read().filter(([known, , page]) => known !== id || page !== PAGE), [id, decision, PAGE]]);
}

export function forgetAnswer(id) {
  write(read().filter(([known, , page]) => known !== id || page !== PAGE));
}

// Whether this browser's answer settled `approval`.
export function answeredHere(approval) {
  const resolution = approval.resolution;
  if (!resolution || resolution.decided_by !== 'web') return false;
  return read().some(([id, decision]) => id === approval.id && decision === resolution.decision);
}
