// What the user does to the open conversation besides writing: fork (also into a copy of the
// working tree), restart from a message (rewind), interrupt, run a failed turn again, and export
// it. (Compressing the context is compaction.js's.)

import { api, streamUrl } from './api.js';
import { enc } from './dom.js';
import { showError, showNotice } from './banners.js';
import { navigate, state } from './state.js';
import { upsertListed } from './sidebar.js';
import { askRestore, noticeRestored } from './filechanges.js';

// Fork and rewind open the copy; the copy then says where it came from (conversation.js shows
// `state.arrival` once the copy is open).
export async function fork() {
  const source = state.conv;
  if (!source) return;
  try {
    const answer = await api('POST', `/api/conversations/${enc(source.id)}/fork`, {});
    upsertListed(answer.conversation);
    state.arrival = { id: answer.conversation.id, kind: 'fork', source: { id: source.id, title: source.title } };
    navigate(`#/c/${enc(answer.conversation.id)}`);
  } catch (error) {
    showError(error);
  }
}

let copying = false; // a fork into a worktree is being made: its tree is copied

// "Fork into a worktree": the copy works in a copy of the working tree as it is now (a linked
// git worktree in a repository), so the two change files apart. Copying a tree takes a moment,
// said meanwhile. When it cannot be made (a turn runs in the directory, the tree cannot be
// copied), nothing was stored: the error says why and offers the fork without a copy.
export async function forkIntoWorktree() {
  const source = state.conv;
  if (!source || copying) return;
  copying = true;
  const waiting = showNotice(['Copying the working tree for the fork…'], { key: 'worktree-copy', conversationId: source.id });
  try {
    const answer = await api('POST', `/api/conversations/${enc(source.id)}/fork`, { worktree: true });
    upsertListed(answer.conversation);
    state.arrival = { id: answer.conversation.id, kind: 'fork', source: { id: source.id, title: source.title }, worktree: answer.worktree || null };
    navigate(`#/c/${enc(answer.conversation.id)}`);
  } catch (error) {
    const instead = { label: 'Fork without a copy', run: fork };
    if (error.code === 'turn_running') {
      showError(error, {
        text: 'A turn is running in this working directory, so its files may be changing: no copy was made. Fork into a worktree once it has ended, or fork now without a copy (in the same directory).',
        action: instead,
      });
    } else if (error.code === 'restore_unavailable') {
      showError(error, { text: 'The working tree cannot be copied, so no fork was made. You can fork without a copy: it then works in the same directory.', action: instead });
    } else {
      showError(error);
    }
  } finally {
    copying = false;
    waiting.remove();
  }
}

// "Restart from here": a copy up to just before the message, with its text in the message box
// of the copy, ready to edit and send (the edit-and-resend pattern). When the conversation
// changed files since (`changed` paths), the user chooses whether they are restored too.
export async function rewind(item, changed) {
  const source = state.conv;
  if (!source) return;
  const body = { message_id: item.id };
  if (changed > 0) {
    const choice = await askRestore(item, changed);
    if (!choice) return;
    if (choice.restore) Object.assign(body, { restore_files: true, force: choice.force });
  }
  try {
    const answer = await api('POST', `/api/conversations/${enc(source.id)}/rewind`, body);
    if (answer.restore) noticeRestored(source.id, answer.restore, answer.conversation ? answer.conversation.id : 'new');
    const text = answer.text !== undefined && answer.text !== null ? answer.text : item.text;
    const from = { id: source.id, title: source.title };
    if (answer.conversation) {
      state.drafts.set(answer.conversation.id, text);
      upsertListed(answer.conversation);
      state.arrival = { id: answer.conversation.id, kind: 'rewind', source: from };
      navigate(`#/c/${enc(answer.conversation.id)}`);
    } else {
      // Restarting from the first message copies nothing: a new conversation in the same
      // directory, as a new page (Back returns to the source).
      state.drafts.set('new', text);
      state.newCwd = source.cwd;
      state.arrival = { id: 'new', kind: 'rewind-first', source: from };
      navigate('#/new');
    }
  } catch (error) {
    showError(error);
  }
}

export async function interruptSession(sessionId) {
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

// Retry of a failed turn: the same text, as a new message to the same agent (a new key: it is
// meant to run again).
// Runs a session's failed turn again, with the messages it had (nothing is posted twice).
// "Retry now": a model call waiting to be tried again is tried at once.
export async function retryNow(sessionId) {
  if (!state.conv) return;
  try {
    await api('POST', `/api/conversations/${enc(state.conv.id)}/retry/now`, { session_id: sessionId });
  } catch (error) {
    showError(error);
  }
}

export async function retryTurn(sessionId) {
  if (!state.conv) return;
  const body = {};
  if (sessionId && sessionId !== state.conv.root_session_id) body.session_id = sessionId;
  try {
    await api('POST', `/api/conversations/${enc(state.conv.id)}/retry`, body);
  } catch (error) {
    showError(error);
  }
}

// Downloads the conversation as a Markdown file (the service names it after the title).
export function exportConversation() {
  if (!state.conv) return;
  const link = document.createElement('a');
  link.href = streamUrl(`/api/conversations/${enc(state.conv.id)}/export?format=markdown`);
  link.download = '';
  document.body.append(link);
  link.click();
  link.remove();
}
