// The "Remembered rules" view (#/rules): the rules that answers to approvals kept, each with its
// tool, pattern, scope, who kept it and when, and a Delete button. Rules have no events of their
// own: the list is read when the view opens, and again when an answer that keeps a rule is
// heard on the list stream while the view is open.

import { api } from './api.js';
import { $, clientName, el, enc, fullTime, plural, relTime } from './dom.js';
import { showError } from './banners.js';
import { isUnreachable, whenBack } from './reconnect.js';
import { announce } from './announcer.js';
import { state } from './state.js';
import { render } from './view.js';
import { toolTitle } from './toolcards.js';

let rules = [];
let loads = 0;

export function openRules() {
  state.view = 'rules';
  render();
  loadRules();
}

// An answer somewhere kept a rule: the open view shows it.
export function followRules(stream) {
  stream.addEventListener('approval.resolved', (event) => {
    const approval = JSON.parse(event.data).approval;
    if (state.view === 'rules' && approval.resolution && approval.resolution.rule) loadRules();
  });
}

async function loadRules() {
  const load = ++loads;
  const view = $('rules-view');
  view.dataset.state = 'loading';
  if (!rules.length) $('rules-status').textContent = 'Loading the rules…';
  let answer;
  try {
    answer = await api('GET', '/api/rules');
  } catch (error) {
    if (load !== loads) return;
    view.dataset.state = 'failed';
    $('rules-status').textContent = 'The rules could not be read.';
    showError(error);
    if (isUnreachable(error)) whenBack('rules', () => state.view === 'rules' && loadRules());
    return;
  }
  if (load !== loads) return;
  rules = answer.rules || [];
  renderRules();
  view.dataset.state = 'loaded';
}

function renderRules() {
  $('rules-table').hidden = rules.length === 0;
  $('rules-status').textContent = rules.length
    ? `${plural(rules.length, 'rule')}, oldest first.`
    : 'No rules are kept: every call the agents’ permissions say to ask about asks.';
  $('rules-body').replaceChildren(...rules.map(ruleRow));
}

function scopeCell(scope) {
  if (scope.kind === 'conversation') {
    const title = state.titles.get(scope.conversation_id);
    return [
      'Conversation ',
      el('a', { href: `#/c/${enc(scope.conversation_id)}` }, title ? `“${title}”` : scope.conversation_id),
    ];
  }
  if (scope.kind === 'always') {
    return ['Agent ', el('strong', {}, `“${scope.agent}”`), ' in ', el('code', {}, scope.cwd), ', every conversation'];
  }
  return JSON.stringify(scope);
}

function ruleRow(rule) {
  const created = Date.parse(rule.created_at);
  const remove = el('button', {
    type: 'button',
    class: 'danger',
    text: 'Delete',
    'aria-label': `Delete the rule “${rule.pattern}” (${toolTitle(rule.tool)})`,
    onclick: () => deleteRule(rule, remove),
  });
  return el(
    'tr',
    { 'data-rule': rule.id, 'data-scope': rule.scope.kind },
    el('td', { class: 'rule-tool' }, toolTitle(rule.tool)),
    el('td', { class: 'rule-pattern' }, el('code', {}, rule.pattern)),
    el('td', { class: 'rule-scope' }, scopeCell(rule.scope)),
    el('td', { class: 'rule-by', title: rule.created_by }, clientName(rule.created_by)),
    el('td', { class: 'rule-when' }, el('time', { datetime: rule.created_at, title: fullTime(created) }, relTime(rule.created_at))),
    el('td', { class: 'rule-actions' }, remove),
  );
}

// Deleted (or already gone): the row goes, and the focus moves to the next row's button.
async function deleteRule(rule, button) {
  try {
    await api('DELETE', `/api/rules/${enc(rule.id)}`);
  } catch (error) {
    if (error.status !== 404) {
      showError(error);
      return;
    }
  }
  const index = rules.findIndex((r) => r.id === rule.id);
  const hadFocus = document.activeElement === button;
  rules = rules.filter((r) => r.id !== rule.id);
  renderRules();
  announce(`The rule “${rule.pattern}” is deleted: the calls it matched ask again.`);
  if (hadFocus) {
    const buttons = $('rules-body').querySelectorAll('button');
    const next = buttons[Math.min(index, buttons.length - 1)];
    (next || $('rules-link')).focus();
  }
}
