// The titles of other conversations, for what points at them (a fork's "from …" in the list and
// its header): from the list when it is there, else asked for once.

import { api } from './api.js';
import { enc } from './dom.js';
import { state } from './state.js';

const requests = new Map(); // conversation id → Promise of its title (null when gone)
const answered = new Map(); // conversation id → what its request resolved with

// Resolves with the title, null when the conversation was deleted, undefined when it could not
// be asked.
export function conversationTitle(id) {
  if (state.titles.has(id)) return Promise.resolve(state.titles.get(id));
  if (!requests.has(id)) {
    requests.set(
      id,
      api('GET', `/api/conversations/${enc(id)}`).then(
        (conversation) => {
          state.titles.set(id, conversation.title);
          return conversation.title;
        },
        (error) => (error.status === 404 ? null : undefined),
      ).then((title) => {
        answered.set(id, title);
        return title;
      }),
    );
  }
  return requests.get(id);
}

// The title if it is known now, without asking: a string, null (deleted) or undefined.
export function knownTitle(id) {
  if (state.titles.has(id)) return state.titles.get(id);
  return answered.get(id);
}
