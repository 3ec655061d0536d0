// The message box and its bar: sending (a new conversation's first message, or a message to the
// open one in the chosen mode while the agent works), drafts kept per conversation, and the
// keys: Enter sends, Shift+Enter adds a line (on a touch screen Return adds a line and only the
// button sends), ↑ in an empty box edits the last waiting message.
// After a send the mode goes back to the default (steer).

import { api } from './api.js';
import { $, el, enc, newKey } from './dom.js';
import { showError } from './banners.js';
import { isRunning, navigate, state } from './state.js';
import { upsertListed } from './sidebar.js';
import { editLastWaiting, noteRunningChanged } from './pending.js';
import { isTouch, putBack, sendsOnEnter } from './messagebox.js';
import { renderPlan } from './plan.js';
import { asCommand, commandKey, wireCommands } from './commands.js';
import { hasImages, keepImages, keepImagesFor, putBackImages, restoreImages, takeImages, wireAttachments } from './attachments.js';

const DEFAULT_MODE = 'steer';

export function renderComposer() {
  const running = isRunning();
  $('mode-label').hidden = !running;
  $('interrupt').hidden = !running;
  $('running-indicator').hidden = !running;
  $('send').disabled = state.view === 'new' && state.send.busy;
  // On a phone " while working" is left out (CSS); the text stays whole for screen readers.
  if (state.view === 'new') $('send').textContent = 'Start';
  else $('send').replaceChildren('Send', running ? el('span', { class: 'send-while' }, ' while working') : '');
  // The plan above the box shows while the agent works.
  renderPlan();
  // The waiting messages' buttons, and the notice of the held ones, follow whether it works.
  noteRunningChanged();
}

// Sends what is in the box. The box is emptied at once, so what the user types next is a new
// message (sent after this one, in order); if the service refuses or cannot be reached, the text
// comes back into the box. A text sent again after a failure reuses its Idempotency-Key, so a
// send whose answer was lost is not done twice. Attached images go with the text (a message may
// be images alone), and come back with it.
export function send() {
  const box = $('message');
  const text = box.value;
  if (!text.trim() && !hasImages()) return;
  // A new conversation is created once: the box waits until it is open.
  if (state.view === 'new' && state.send.busy) return;
  let target;
  if (state.view === 'new') {
    target = { kind: 'new', cwd: $('cwd').value.trim(), model: $('model-select').value };
  } else if (state.view === 'conversation' && state.conv) {
    target = {
      kind: 'message',
      conversationId: state.conv.id,
      cwd: state.conv.cwd,
      mode: isRunning() ? $('mode').value : null,
      sessionId: state.sessionId && state.sessionId !== state.conv.root_session_id ? state.sessionId : null,
    };
  } else {
    return;
  }
  // Where the text goes back to, as a draft, if it cannot be sent.
  target.draft = draftKey();
  box.value = '';
  const images = takeImages();
  $('mode').value = DEFAULT_MODE;
  state.drafts.delete(target.draft);
  const key = state.send.failed && state.send.failed.text === text ? state.send.failed.key : newKey();
  state.send.failed = null;
  sending = sending.then(() => deliver(text, images, key, target));
}

let sending = Promise.resolve();

async function deliver(text, { images, taken }, key, target) {
  const headers = { 'Idempotency-Key': key };
  state.send.busy = true;
  renderComposer();
  try {
    // `/name arguments` naming one of the directory's commands goes as that command.
    const command = await asCommand(text, target.cwd);
    const message = command || (text ? { text } : {});
    if (target.kind === 'new') {
      const body = { ...message };
      if (images.length) body.images = images;
      if (target.cwd) body.cwd = target.cwd;
      if (target.model) body.model = target.model;
      const created = await api('POST', '/api/conversations', body, headers);
      state.newCwd = '';
      upsertListed(created.conversation);
      navigate(`#/c/${enc(created.conversation.id)}`);
    } else {
      const body = { ...message };
      if (images.length) body.images = images;
      if (target.mode) body.mode = target.mode;
      if (target.sessionId) body.session_id = target.sessionId;
      await api('POST', `/api/conversations/${enc(target.conversationId)}/messages`, body, headers);
    }
  } catch (error) {
    state.send.failed = { text, key };
    const stillThere = target.kind === 'new' ? state.view === 'new' : state.conv && state.conv.id === target.conversationId;
    // A message that could not be sent goes back where it was typed, before anything typed since.
    if (stillThere) {
      putBack(text);
      putBackImages(taken);
    } else {
      state.drafts.set(target.draft, text);
      keepImagesFor(target.draft, taken);
    }
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
  keepImages(key);
  if (state.view === 'new') state.newCwd = $('cwd').value;
}

export function restoreDraft(key) {
  $('message').value = state.drafts.get(key) || '';
  restoreImages(key);
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
  wireCommands();
  $('message').addEventListener('keydown', (event) => {
    if (commandKey(event)) return;
    if (sendsOnEnter(event)) {
      event.preventDefault();
      send();
    } else if (event.key === 'ArrowUp' && !event.shiftKey && !event.altKey && $('message').value === '' && state.view === 'conversation') {
      if (editLastWaiting()) event.preventDefault();
    }
  });
  $('interrupt').addEventListener('click', interrupt);
  wireAttachments();
  if (isTouch()) $('message').placeholder = 'Message the agent — Return adds a line, Send sends';
}
