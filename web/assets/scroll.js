// Scrolling the timeline: it follows new output while the reader is at the end, and offers a
// "New output below" button once they have scrolled up.

import { $ } from './dom.js';
import { state } from './state.js';

let stickToBottom = true;
// Where the page last scrolled to by itself. A scroll event can come after more content
// arrived; only a position above this one means the reader moved up.
let autoScrollTop = 0;

// The button's attribute is written only when it changes: a write is a DOM mutation, and
// scroll events come many times a second.
function showNewOutput(shown) {
  const button = $('new-output');
  if (button.hidden === shown) button.hidden = !shown;
}

// A conversation closes: nothing is below the end any more.
export function resetScroll() {
  autoScrollTop = 0;
  showNewOutput(false);
}

function scrollToEnd(timeline) {
  timeline.scrollTop = timeline.scrollHeight;
  autoScrollTop = timeline.scrollTop;
}

export function scrollToBottom() {
  stickToBottom = true;
  scrollToEnd($('timeline'));
  showNewOutput(false);
}

// New content: followed when the reader is at the end, else announced by the button.
function followOutput() {
  if (stickToBottom) scrollToEnd($('timeline'));
  else if (state.view === 'conversation') showNewOutput(true);
}

export function watchTimeline() {
  const timeline = $('timeline');
  timeline.addEventListener('scroll', () => {
    const atEnd = timeline.scrollHeight - timeline.scrollTop - timeline.clientHeight < 40;
    if (atEnd) stickToBottom = true;
    else if (timeline.scrollTop < autoScrollTop - 2) stickToBottom = false;
    if (stickToBottom) showNewOutput(false);
  });
  // The reader asking to go up wins at once, even if new output arrives before the scroll.
  const moveUp = () => {
    if (timeline.scrollHeight > timeline.clientHeight) stickToBottom = false;
  };
  timeline.addEventListener('wheel', (event) => event.deltaY < 0 && moveUp(), { passive: true });
  timeline.addEventListener('touchmove', moveUp, { passive: true });
  timeline.addEventListener('keydown', (event) => ['ArrowUp', 'PageUp', 'Home'].includes(event.key) && moveUp());
  $('new-output').addEventListener('click', scrollToBottom);
  // New output is followed once a frame, after layout, when the timeline's content grew: never
  // from an event handler, where asking for the height would force a layout per event.
  let lastHeight = 0;
  const observer = new ResizeObserver(() => {
    const height = $('items').offsetHeight + $('status-lines').offsetHeight;
    if (height > lastHeight) followOutput();
    lastHeight = height;
  });
  observer.observe($('items'));
  observer.observe($('status-lines'));
  observer.observe(timeline);
}
