// What the user does to the open conversation besides writing: fork, restart from a message
// (rewind), interrupt, run a failed turn again, and export it. (Compressing the context is
// compaction.js's.)

import { api, streamUrl } from './api.js';
import { enc } from './dom.js';
import { showError } from './banners.js';
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
