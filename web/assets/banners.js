// Banners above the conversation: errors written for people (the API's code follows in small
// type) and notices (a fork's confirmation, messages given back after a restart).
//
// Errors clear themselves: one about reaching the service when the next call succeeds or a
// stream reconnects; any error when the next change the user makes succeeds.

import { $, el } from './dom.js';
import { ApiError, apiEvents } from './api.js';

// What each API error code means to the person using the page. The service's own message
// follows in small type, for the details (a path, a model's name).
const FOR_PEOPLE = {
  network: 'The OpenVaala service does not answer. Is it still running? Reconnecting: the page goes on by itself once it is back.',
  unavailable: 'The service is busy or stopping. Try again in a moment.',
  internal: 'Something went wrong inside the service. Its log has the details.',
  turn_running: 'The agent is still working on this conversation. Wait for it to finish, or interrupt it first.',
  messages_waiting: 'Messages are waiting for the agent. Wait until it has taken them, or withdraw them first.',
  not_waiting: 'The agent already took that message, so it cannot be changed any more.',
  compaction_running: 'The context is being compressed right now. Try again when that is done.',
  nothing_to_compact: 'There is nothing older to compress: the model already reads only the latest turn, after any earlier summary.',
  compaction_failed: 'Compressing the context failed. The history is unchanged.',
  cwd_missing: 'The working directory of this conversation is missing.',
  cwd_refused: 'The service will not work in that directory: its tools could reach everything there. Choose a project directory.',
  model_unavailable: 'The model of this conversation is not configured on this service. Pick another model in the header.',
  agent_unavailable: 'The agent of this conversation is not configured on this service.',
  source_missing: 'The conversation this one was forked from is missing; move the two together.',
  conversation_damaged: 'A file of this conversation is damaged. Stop the service and run the repair command below.',
  too_large: 'That is too large for the service to accept.',
  invalid_request: 'The service could not accept that.',
  not_found: 'That no longer exists. Maybe it was deleted in another window.',
  unauthorized: 'The service needs its access token.',
  forbidden: 'The service refused this request.',
  idempotency_key_reused: 'That request was already made with other content; send it again.',
};

const NETWORK_CODES = new Set(['network', 'unavailable', 'internal']);

// The sentence a person reads for an error, and the technical details beside it.
function describeError(error, text) {
  if (error instanceof ApiError) {
    const known = FOR_PEOPLE[error.code];
    return {
      text: text || known || error.message,
      code: error.code,
      detail: known || text ? error.message : null,
      network: NETWORK_CODES.has(error.code) || error.status >= 500,
    };
  }
  return { text: text || String((error && error.message) || error), code: null, detail: null, network: false };
}

// Shows an error. `options.text` replaces the generic sentence; `options.action` adds a button
// ({label, run}).
export function showError(error, options = {}) {
  if (error && error.name === 'AbortError') return;
  const { text, code, detail, network } = describeError(error, options.text);
  const banners = $('banners');
  // The same sentence twice in a row is shown once.
  for (const existing of [...banners.children]) {
    if (existing.dataset.text === text) existing.remove();
  }
  const banner = el(
    'div',
    { class: 'banner error', role: 'alert' },
    el(
      'div',
      { class: 'banner-body' },
      el('span', { class: 'banner-text' }, text),
      code || detail
        ? el('span', { class: 'banner-detail' }, code ? el('code', {}, code) : null, detail ? ` ${detail}` : null)
        : null,
    ),
    actionButton(options.action, () => banner.remove()),
    closeButton(() => banner.remove()),
  );
  banner.dataset.text = text;
  banner.dataset.scope = network ? 'network' : 'action';
  banners.append(banner);
  while (banners.querySelectorAll('.banner.error').length > 3) banners.querySelector('.banner.error').remove();
  return banner;
}

// An informational notice, kept until dismissed or until another conversation opens.
// `content` is a list of strings and nodes; `key` replaces an earlier notice of the same key.
export function showNotice(content, options = {}) {
  const banners = $('banners');
  if (options.key) banners.querySelectorAll(`.banner.notice[data-key="${options.key}"]`).forEach((n) => n.remove());
  const banner = el(
    'div',
    { class: `banner notice${options.kind ? ` ${options.kind}` : ''}`, role: 'status' },
    el('div', { class: 'banner-body' }, el('span', { class: 'banner-text' }, ...content)),
    actionButton(options.action, () => banner.remove()),
    closeButton(() => banner.remove()),
  );
  if (options.key) banner.dataset.key = options.key;
  if (options.conversationId) banner.dataset.conversation = options.conversationId;
  banners.append(banner);
  return banner;
}

// Errors of the reaching-the-service kind, or every error.
export function clearErrors(scope) {
  const selector = scope ? `.banner.error[data-scope="${scope}"]` : '.banner.error';
  $('banners').querySelectorAll(selector).forEach((banner) => banner.remove());
}

// Notices that belong to another conversation than the one now open.
export function clearNoticesExcept(conversationId) {
  $('banners')
    .querySelectorAll('.banner.notice')
    .forEach((banner) => {
      if (banner.dataset.conversation !== conversationId) banner.remove();
    });
}

function actionButton(action, done) {
  if (!action) return null;
  return el('button', {
    type: 'button',
    class: 'banner-action',
    text: action.label,
    onclick: () => {
      done();
      action.run();
    },
  });
}

function closeButton(done) {
  return el('button', { type: 'button', class: 'banner-close', title: 'Dismiss', 'aria-label': 'Dismiss', text: '×', onclick: done });
}

// The service answered: it is reachable again. A change the user made went through: what
// went wrong before is past.
apiEvents.addEventListener('success', (event) => {
  clearErrors(event.detail.method === 'GET' ? 'network' : null);
});
