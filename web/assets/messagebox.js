// Text handed back to the user goes into the message box, before what they are typing: a send
// that failed, a waiting message they withdrew, waiting messages a restart of the service lost.
// Nothing the user wrote is dropped, and nothing they typed since is overwritten. Also: which
// key sends from a message box.

import { $ } from './dom.js';

// The text first, then a blank line, then what was already in the box.
export function putBack(text) {
  const box = $('message');
  box.value = box.value.trim() ? `${text}\n\n${box.value}` : text;
}

// Put back with the box focused and the caret after the text, ready to edit it.
export function insertIntoComposer(text) {
  putBack(text);
  const box = $('message');
  box.focus();
  box.setSelectionRange(text.length, text.length);
}

// On a touch screen there is no Shift at hand: Return adds a line there, and the button sends.
const touch = window.matchMedia('(pointer: coarse)');

export function isTouch() {
  return touch.matches;
}

// Whether this key press sends what is in a message box: Enter, without Shift (which adds a
// line), not while an input method composes, and not on a touch screen.
export function sendsOnEnter(event) {
  return event.key === 'Enter' && !event.shiftKey && !event.isComposing && !event.altKey && !touch.matches;
}
