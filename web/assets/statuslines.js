// The status lines under the timeline's items: one line for a model call's retries (counting
// down to the next attempt), a line while the context is compressed, and the connection's state.

import { $, el } from './dom.js';

let retry = null; // { line, timer }

// A conversation closes: its lines go, except the connection's (the stream says when it is back).
export function clearStatusLines() {
  clearRetry();
  $('status-lines').querySelectorAll('.line:not(.connection-line)').forEach((line) => line.remove());
}

// One line for all the retries of a model call, counting down to the next attempt: from the
// live event's delay, or, for a retry a snapshot shows (a client that joined during the wait),
// from its `next_at`. Its Retry now button calls `now` (the attempt is made at once), its Stop
// button `stop` (which interrupts the turn): a provider that keeps failing need not be waited
// out.
export function showRetry(data, { now, stop }) {
  clearRetry();
  const next = data.attempt + 1;
  const until = data.delay_ms != null ? Date.now() + data.delay_ms : Date.parse(data.next_at);
  const countdown = el('span', { class: 'countdown', 'aria-hidden': 'true' });
  const line = el(
    'div',
    { class: 'line retry', role: 'status' },
    el('span', {}, `The model call failed (${data.error}). Attempt ${next} of ${data.max_attempts} `),
    countdown,
    ' ',
    el('button', {
      type: 'button',
      class: 'link-button retry-now',
      text: 'Retry now',
      title: 'Try the model call again now instead of waiting',
      onclick: (event) => {
        keepFocus(event.target);
        event.target.disabled = true;
        now();
      },
    }),
    ' ',
    el('button', {
      type: 'button',
      class: 'link-button retry-stop',
      text: 'Stop',
      title: 'Stop the turn instead of trying again (like Interrupt)',
      onclick: (event) => {
        keepFocus(event.target);
        event.target.disabled = true;
        stop();
      },
    }),
  );
  const tick = () => {
    const seconds = Math.ceil((until - Date.now()) / 1000);
    countdown.textContent = seconds > 0 ? `in ${seconds} s` : 'now';
  };
  tick();
  retry = { line, timer: setInterval(tick, 250) };
  $('status-lines').append(line);
}

// A button pressed with the focus on it is disabled (the browser then moves the focus to the
// page): when its line goes, the focus goes on to the message box.
function keepFocus(button) {
  if (retry && button === document.activeElement) retry.handsFocus = true;
}

export function clearRetry() {
  if (!retry) return;
  clearInterval(retry.timer);
  const focused = retry.line.contains(document.activeElement) || (retry.handsFocus && document.activeElement === document.body);
  retry.line.remove();
  retry = null;
  if (focused) $('message').focus();
}

export function addLine(kind, text) {
  const line = el('div', { class: `line ${kind}`, role: 'status' }, text);
  $('status-lines').append(line);
  return line;
}

export function removeLines(kind) {
  $('status-lines').querySelectorAll(`.line.${kind}`).forEach((line) => line.remove());
}

export function setConnection(text) {
  const lines = $('status-lines');
  let line = lines.querySelector('.connection-line');
  if (!text) {
    if (line) line.remove();
    return;
  }
  if (!line) {
    line = el('div', { class: 'line connection-line', role: 'status' });
    lines.append(line);
  }
  line.textContent = text;
}
