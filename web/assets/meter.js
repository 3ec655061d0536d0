// The context meter: how much of the model's context window the conversation uses, in figures
// (used / window), with the compaction threshold marked and labelled, and what "reported" and
// "estimated" mean on hover (and for screen readers). Past the whole window (a message larger
// than the window) it says under the bar what happens next: the older history is summarized
// before the next model call, and what still does not fit the provider may refuse.

// What the meter says past the whole window.
const OVER_TEXT =
  'Over the context window: the older history will be summarized before the next model call; if what remains still does not fit, the model provider may refuse the request.';

import { $, el, formatCount, formatTokens } from './dom.js';
import { state } from './state.js';

// While a reply streams, the meter moves with it: the text streamed into the root session since
// the last figures the service sent counts at about 4 characters a token, until the next
// figures (which count it properly) replace the estimate.
const CHARS_PER_TOKEN = 4;
let streamedChars = 0;
let countedFrom = null; // the usage the streamed characters are on top of
let timer = 0;
// How often the moving meter is drawn: often enough to be seen moving, rarely enough to cost
// nothing beside a fast stream.
const LIVE_RENDER_MS = 250;

function streamedTokens() {
  if (state.usage !== countedFrom) {
    countedFrom = state.usage;
    streamedChars = 0;
  }
  return Math.ceil(streamedChars / CHARS_PER_TOKEN);
}

// Text streamed into the root session's context (a reply, reasoning, a tool's output): the
// meter is drawn again a few times a second, not per piece.
export function noteStreamed(chars) {
  streamedTokens();
  streamedChars += chars;
  if (!timer) {
    timer = setTimeout(() => {
      timer = 0;
      renderUsage();
    }, LIVE_RENDER_MS);
  }
}

export function renderUsage() {
  const box = $('usage');
  const usage = state.usage;
  if (state.view !== 'conversation' || !usage || !usage.context_window) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  const live = streamedTokens();
  const used = usage.used_tokens + live;
  const windowSize = usage.context_window;
  const percent = live ? (used / windowSize) * 100 : Math.max(0, Number(usage.percent) || 0);
  const sourceName = live ? 'estimated' : usage.source;
  const threshold = usage.threshold_tokens || null;
  const thresholdPercent = threshold ? (threshold / windowSize) * 100 : null;

  $('usage-figures').textContent = `${formatTokens(used)} / ${formatTokens(windowSize)} tokens`;
  const source = $('usage-source');
  source.textContent = sourceName;
  source.title =
    sourceName === 'reported'
      ? 'Reported: the model provider counted the last request; what was added since is estimated.'
      : 'Estimated: the service counted this itself, since the provider has not reported a count for the latest messages.';

  const bar = $('usage-bar');
  bar.setAttribute('aria-valuemax', String(windowSize));
  bar.setAttribute('aria-valuenow', String(Math.min(used, windowSize)));
  bar.setAttribute('aria-valuetext', `${formatCount(used)} of ${formatCount(windowSize)} tokens (${percent.toFixed(0)}%), ${sourceName}`);
  const fill = $('usage-fill');
  fill.style.width = `${Math.min(100, percent)}%`;
  fill.classList.toggle('warn', thresholdPercent !== null && percent >= thresholdPercent * 0.85);
  fill.classList.toggle('full', thresholdPercent !== null && percent >= thresholdPercent);
  const marker = $('usage-threshold');
  const label = $('usage-threshold-label');
  marker.hidden = thresholdPercent === null;
  label.hidden = thresholdPercent === null;
  if (thresholdPercent !== null) {
    marker.style.left = `${Math.min(100, thresholdPercent)}%`;
    label.textContent = `compacts at ${formatTokens(threshold)}`;
  }

  const added = usage.estimated_since_report || 0;
  const how =
    (usage.source === 'reported'
      ? `${formatCount(usage.reported_tokens)} reported by the model provider for the last request${added ? ` + about ${formatCount(added)} estimated for what was added since` : ''}.`
      : 'Estimated by the service: the provider has not reported a count since the last change.') +
    (live ? ` Plus about ${formatCount(live)} for the reply streaming now (4 characters a token), until the service counts it.` : '');
  const explanation =
    `Context in use: ${formatCount(used)} of ${formatCount(windowSize)} tokens (${percent.toFixed(1)}%). ${how}` +
    (threshold ? ` At ${formatCount(threshold)} tokens (the compaction threshold) older history is summarized.` : '');
  const over = used > windowSize;
  let overNote = $('usage-over');
  if (over && !overNote) {
    overNote = el('div', { id: 'usage-over', class: 'usage-over' });
    box.append(overNote);
  }
  if (overNote) {
    overNote.hidden = !over;
    // On a phone the line is too narrow for the whole sentence: a short one shows, the whole
    // one is read out (and is in the meter's explanation).
    if (over && !overNote.firstChild) {
      overNote.append(el('span', { class: 'usage-over-full' }, OVER_TEXT), el('span', { class: 'usage-over-short', 'aria-hidden': 'true' }, 'Over the window: summarized first, or refused'));
    }
  }
  box.classList.toggle('over', over);
  box.title = over ? `${explanation} ${OVER_TEXT}` : explanation;
  $('usage-explanation').textContent = over ? `${explanation} ${OVER_TEXT}` : explanation;
}
