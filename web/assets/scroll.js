// Scrolling the timeline: it follows new output while the reader is at the end. Once they have
// scrolled up, a button at the timeline's foot takes them back: "Jump to latest" while nothing
// came meanwhile, "New output below" once the stream brought more.

import { $ } from './dom.js';
import { state } from './state.js';

let stickToBottom = true;
// Where the page last scrolled to by itself. A scroll event can come after more content
// arrived; only a position above this one means the reader moved up.
let autoScrollTop = 0;
// The stream brought output for the timeline since the reader left the end. Growth alone does
// not say so: a long reply received before the reader scrolled up can still be rendering (a few
// Markdown blocks a frame), and that is not news.
let arrived = false;
let shownAs = null; // what the button says: null (hidden), 'jump' or 'new'

const LABELS = { jump: 'Jump to latest ↓', new: 'New output below ↓' };

// The button is written only when what it shows changes: a write is a DOM mutation, and
// scroll events come many times a second.
function showButton(kind) {
  if (state.view !== 'conversation') kind = null;
  if (kind === shownAs) return;
  shownAs = kind;
  const button = $('new-output');
  button.hidden = kind === null;
  if (kind) button.textContent = LABELS[kind];
}

// A conversation closes: nothing is below the end any more.
export function resetScroll() {
  autoScrollTop = 0;
  arrived = false;
  stickToBottom = true;
  showButton(null);
}

function scrollToEnd(timeline) {
  timeline.scrollTop = timeline.scrollHeight;
  autoScrollTop = timeline.scrollTop;
}

export function scrollToBottom() {
  stickToBottom = true;
  arrived = false;
  scrollToEnd($('timeline'));
  showButton(null);
}

// The reader leaves the end: what arrives from now on is news to them.
function leaveEnd() {
  if (stickToBottom) arrived = false;
  stickToBottom = false;
}

// The stream brought something for the timeline shown (an item, a delta, a status line). Called
// by the conversation's event handling; cheap, as it runs per event.
export function noteOutput() {
  if (!stickToBottom) arrived = true;
}

// The content grew: followed when the reader is at the end, else said by the button when the
// growth is output that arrived since they left.
function followOutput() {
  if (stickToBottom) scrollToEnd($('timeline'));
  else if (arrived) showButton('new');
}

export function watchTimeline() {
  const timeline = $('timeline');
  timeline.addEventListener('scroll', () => {
    const atEnd = timeline.scrollHeight - timeline.scrollTop - timeline.clientHeight < 40;
    if (atEnd) {
      stickToBottom = true;
      arrived = false;
    } else if (timeline.scrollTop < autoScrollTop - 2) leaveEnd();
    if (stickToBottom) showButton(null);
    else if (shownAs !== 'new') showButton('jump');
  });
  // The reader asking to go up wins at once, even if new output arrives before the scroll.
  const moveUp = () => {
    if (timeline.scrollHeight > timeline.clientHeight) leaveEnd();
  };
  timeline.addEventListener('wheel', (event) => event.deltaY < 0 && moveUp(), { passive: true });
  timeline.addEventListener('touchmove', moveUp, { passive: true });
  timeline.addEventListener('keydown', (event) => ['ArrowUp', 'PageUp', 'Home'].includes(event.key) && moveUp());
  $('new-output').addEventListener('click', scrollToBottom);
  // New output is followed once a frame, after layout, when the timeline's content grew: never
  // from an event handler, where asking for the height would force a layout per event.
  // The timeline getting shorter (waiting messages or a panel appearing under it, a phone's
  // keyboard) keeps its end in view too.
  let lastHeight = 0;
  let lastView = 0;
  const observer = new ResizeObserver(() => {
    const height = $('items').offsetHeight + $('status-lines').offsetHeight;
    const view = timeline.clientHeight;
    if (height > lastHeight || view < lastView) followOutput();
    lastHeight = height;
    lastView = view;
  });
  observer.observe($('items'));
  observer.observe($('status-lines'));
  observer.observe(timeline);
}
