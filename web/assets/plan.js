// The agent's plan (its `update_plan` calls, stored as `plan` items): a checklist above the
// message box while the session shown works, following the newest plan item of that session
// as the item events bring them, and folding to one line on request; and the compact checklist
// a plan item shows as in the history. Hidden while the session is idle or has no plan.

import { $, el } from './dom.js';
import { isRunning } from './state.js';

const STATUS_TEXT = { completed: 'completed', in_progress: 'in progress', pending: 'pending' };

let current = null; // the newest plan item of the session shown
let collapsed = false;

// Forgets the plan (another conversation or session is shown).
export function resetPlan() {
  current = null;
  renderPlan();
}

// An item of the session shown: a plan newer than the one shown replaces it.
export function notePlan(item) {
  if (item.kind !== 'plan') return;
  if (current && current.seq > item.seq) return;
  current = item;
  renderPlan();
}

export function renderPlan() {
  const panel = $('plan');
  const shown = !!current && isRunning();
  panel.hidden = !shown;
  if (!shown) return;
  const steps = current.steps || [];
  const done = steps.filter((step) => step.status === 'completed').length;
  $('plan-progress').textContent = `${done} of ${steps.length} done`;
  const active = steps.find((step) => step.status === 'in_progress');
  // Folded, the step at work still shows on the title's line.
  $('plan-now').textContent = collapsed && active ? active.step : '';
  $('plan-toggle').setAttribute('aria-expanded', String(!collapsed));
  $('plan-body').hidden = collapsed;
  $('plan-body').replaceChildren(...planContent(current));
}

// A plan's explanation and its steps, each marked as done, at work or to do.
export function planContent(item) {
  return [
    item.explanation ? el('p', { class: 'plan-explanation' }, item.explanation) : null,
    el(
      'ol',
      { class: 'plan-steps' },
      (item.steps || []).map((step) =>
        el(
          'li',
          { class: `plan-step step-${step.status.replace(/_/g, '-')}`, 'aria-current': step.status === 'in_progress' ? 'step' : null },
          el('span', { class: 'plan-mark', 'aria-hidden': 'true' }, step.status === 'completed' ? '✓' : ''),
          el('span', { class: 'visually-hidden' }, `${STATUS_TEXT[step.status] || step.status}: `),
          el('span', { class: 'plan-text' }, step.step),
        ),
      ),
    ),
  ];
}

export function wirePlan() {
  $('plan-toggle').addEventListener('click', () => {
    collapsed = !collapsed;
    renderPlan();
  });
}
