// The message box and its bar: sending (a new conversation's first message, or a message to the
// open one in the chosen mode while the agent works), drafts kept per conversation, and the
// keys: Enter sends, Shift+Enter adds a line, ↑ in an empty box edits the last waiting message.
// After a send the mode goes back to the default (steer).

import { api } from './api.js';
import { $, el, enc, newKey } from './dom.js';
import { showError } from './banners.js';
import { isRunning, state } from './state.js';
import { upsertListed } from './sidebar.js';
import { editLastWaiting } from './pending.js';

const DEFAULT_MODE = 'steer';

// Text handed back to the user (a withdrawn or lost message) goes before what they are typing.
export function insertIntoComposer(text) {
  const box = $('message');
  box.value = box.value.trim() ? `${text}\n\n${box.value}` : text;
  box.focus();
  box.setSelectionRange(text.length, text.length);
}

export function renderComposer() {
  const running = isRunning();
  $('mode-label').hidden = !running;
  $('interrupt').hidden = !running;
  $('running-indicator').hidden = !running;
  $('send').disabled = state.send.busy;
  $('send').textContent = state.view === 'new' ? 'Start' : running ? 'Send while working' : 'Send';
}

export async function send() {
  const box = $('message');
  const text = box.value;
  if (!text.trim() || state.send.busy) return;
  // One key per message: a send that is retried (after an error) uses the same key, so the
  // service does it only once; a changed text is a new message.
  if (!state.send.key || state.send.text !== text) {
    state.send.key = newKey();
    state.send.text = text;
  }
  const headers = { 'Idempotency-Key': state.send.key };
  state.send.busy = true;
  renderComposer();
  try {
    if (state.view === 'new') {
      const body = { text };
      const cwd = $('cwd').value.trim();
      if (cwd) body.cwd = cwd;
      const model = $('model-select').value;
      if (model) body.model = model;
      const created = await api('POST', '/api/conversations', body, headers);
      box.value = '';
      state.drafts.delete('new');
      state.newCwd = '';
      upsertListed(created.conversation);
      location.hash = `#/c/${enc(created.conversation.id)}`;
    } else if (state.view === 'conversation' && state.conv) {
      const body = { text };
      if (isRunning()) body.mode = $('mode').value;
      if (state.sessionId && state.sessionId !== state.conv.root_session_id) body.session_id = state.sessionId;
      await api('POST', `/api/conversations/${enc(state.conv.id)}/messages`, body, headers);
      if (box.value === text) box.value = '';
      state.drafts.delete(state.conv.id);
    }
    state.send.key = null;
    state.send.text = null;
    $('mode').value = DEFAULT_MODE;
  } catch (error) {
    showError(error);
  } finally {
    state.send.busy = false;
    renderComposer();
  }
}

// ------------------------------------------------------------------------------------------------
// Drafts: what was typed stays with its conversation while the user looks at another.

function draftKey() {
  if (state.view === 'new') return 'new';
  return state.conv ? state.conv.id : null;
}

export function saveDraft() {
  const key = draftKey();
  if (!key) return;
  const text = $('message').value;
  if (text) state.drafts.set(key, text);
  else state.drafts.delete(key);
  if (state.view === 'new') state.newCwd = $('cwd').value;
}

export function restoreDraft(key) {
  $('message').value = state.drafts.get(key) || '';
}

export function fillModels() {
  const select = $('model-select');
  const defaultModel = document.body.dataset.defaultModel;
  select.replaceChildren(
    el('option', { value: '' }, `agent's default${defaultModel ? ` (${defaultModel})` : ''}`),
    ...state.models.map((model) => el('option', { value: model.id }, model.id)),
  );
  select.closest('label').hidden = state.models.length <= 1;
}

export function wireComposer(interrupt) {
  $('composer').addEventListener('submit', (event) => {
    event.preventDefault();
    send();
  });
  $('message').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing && !event.altKey) {
      event.preventDefault();
      send();
    } else if (event.key === 'ArrowUp' && !event.shiftKey && !event.altKey && $('message').value === '' && state.view === 'conversation') {
      if (editLastWaiting()) event.preventDefault();
    }
  });
  $('interrupt').addEventListener('click', interrupt);
}
