// The context meter: how much of the model's context window the conversation uses, in figures
// (used / window), with the compaction threshold marked and labelled, and what "reported" and
// "estimated" mean on hover (and for screen readers).

import { $, formatCount, formatTokens } from './dom.js';
import { state } from './state.js';

export function renderUsage() {
  const box = $('usage');
  const usage = state.usage;
  if (state.view !== 'conversation' || !usage || !usage.context_window) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  const used = usage.used_tokens;
  const windowSize = usage.context_window;
  const percent = Math.max(0, Number(usage.percent) || 0);
  const threshold = usage.threshold_tokens || null;
  const thresholdPercent = threshold ? (threshold / windowSize) * 100 : null;

  $('usage-figures').textContent = `${formatTokens(used)} / ${formatTokens(windowSize)} tokens`;
  const source = $('usage-source');
  source.textContent = usage.source;
  source.title =
    usage.source === 'reported'
      ? 'Reported: the model provider counted the last request; what was added since is estimated.'
      : 'Estimated: the service counted this itself, since the provider has not reported a count for the latest messages.';

  const bar = $('usage-bar');
  bar.setAttribute('aria-valuemax', String(windowSize));
  bar.setAttribute('aria-valuenow', String(Math.min(used, windowSize)));
  bar.setAttribute('aria-valuetext', `${formatCount(used)} of ${formatCount(windowSize)} tokens (${percent.toFixed(0)}%), ${usage.source}`);
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
    usage.source === 'reported'
      ? `${formatCount(usage.reported_tokens)} reported by the model provider for the last request${added ? ` + about ${formatCount(added)} estimated for what was added since` : ''}.`
      : 'Estimated by the service: the provider has not reported a count since the last change.';
  const explanation =
    `Context in use: ${formatCount(used)} of ${formatCount(windowSize)} tokens (${percent.toFixed(1)}%). ${how}` +
    (threshold ? ` At ${formatCount(threshold)} tokens (the compaction threshold) older history is summarized.` : '');
  box.title = explanation;
  $('usage-explanation').textContent = explanation;
}
