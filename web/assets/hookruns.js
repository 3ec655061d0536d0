// The configured hooks that ran for an item, as small lines under it: which hook, what came of
// it (allowed, denied, asked, changed the call, a note or context for the model, failed) and
// how long it took, with its reason or note. A call a hook rewrote also shows what the model
// had asked for, since the card shows what ran.

import { el } from './dom.js';

const OUTCOMES = {
  ran: 'ran',
  allow: 'allowed',
  ask: 'asked a person',
  deny: 'denied',
  changed: 'changed the call',
  note: 'left a note',
  context: 'added context',
  failed: 'failed',
};

function line(run) {
  const outcome = OUTCOMES[run.outcome] || run.outcome;
  const parts = [
    el('span', { class: 'hook-name' }, run.hook),
    ` · ${outcome} · ${run.ms} ms`,
  ];
  if (run.detail) parts.push(el('span', { class: 'hook-detail' }, ` — ${run.detail}`));
  const node = el('li', { class: `hook-run hook-${run.outcome}` }, ...parts);
  if (run.arguments_before) {
    const asked = run.arguments_before.command ?? JSON.stringify(run.arguments_before);
    node.append(el('div', { class: 'hook-before' }, 'the model asked for: ', el('code', {}, asked)));
  }
  return node;
}

// The list, or null when no hook ran.
export function hookRuns(runs) {
  if (!Array.isArray(runs) || runs.length === 0) return null;
  return el('ul', { class: 'hook-runs', 'aria-label': 'hooks that ran' }, ...runs.map(line));
}
