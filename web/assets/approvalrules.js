// The rules an approval card keeps when the answer remembers ("Allow in this conversation",
// "Always allow"): one field per part of the call that asks (a compound command has several),
// each holding that part's exact text, which the user may edit. Where the service offers a
// broader rule (`git push*`), a choice beside the field puts either in it, the broader one
// saying what else it would allow. The field holds what is sent, whichever was chosen.

import { el } from './dom.js';
import { markInvisible } from './visible.js';

// What the approval suggests: `suggested_rules`, else the single `suggested_rule` of a service
// that keeps one, else one empty field to write a rule in.
function suggestions(approval) {
  if (approval.suggested_rules && approval.suggested_rules.length) return approval.suggested_rules;
  return [{ rule: approval.suggested_rule || '', broader: null }];
}

// Under a field whose rule has invisible characters: the rule with them marked, since the field
// itself cannot mark them.
function markedLine(field) {
  const line = el('p', { class: 'approval-rule-marked' });
  const update = () => {
    const marked = markInvisible(field.value);
    line.hidden = marked.count === 0;
    line.replaceChildren('As written: ', el('code', {}, marked.nodes));
  };
  field.addEventListener('input', update);
  update();
  return { line, update };
}

// "only this" or the broader rule; choosing puts the rule in the field.
function scopeChoice(part, broader, label, id) {
  const name = `${id}-scope`;
  const radio = (value, extra) =>
    el('input', { type: 'radio', name, value, checked: value === 'exact', ...extra, onchange: () => choose(part, value) });
  const also = broader.also_allows && broader.also_allows.length ? broader.also_allows : null;
  const alsoId = `${id}-also`;
  return el(
    'div',
    { class: 'approval-scope', role: 'radiogroup', 'aria-label': `What ${label.toLowerCase()} allows` },
    el('label', {}, radio('exact'), ' only this'),
    el('label', {}, radio('broader', { 'aria-describedby': also ? alsoId : null }), ' ', el('code', {}, markInvisible(broader.rule).nodes)),
    also
      ? el(
          'span',
          { class: 'approval-also', id: alsoId },
          'also allows: ',
          also.map((example, index) => [index ? ', ' : '', el('code', {}, markInvisible(example).nodes)]),
          ', …',
        )
      : null,
  );
}

function choose(part, value) {
  part.chosen = value;
  part.field.value = part.suggested();
  part.marked.update();
}

function rulePart(choice, index, total, prefix, hintId) {
  const id = `${prefix}-rule-${index}`;
  const label = total > 1 ? `Rule ${index + 1}` : 'Rule';
  const field = el('input', {
    type: 'text',
    id,
    class: 'approval-rule',
    value: choice.rule,
    spellcheck: false,
    autocomplete: 'off',
    'aria-describedby': hintId,
  });
  const part = { field, chosen: 'exact', marked: markedLine(field) };
  part.suggested = () => (part.chosen === 'broader' ? choice.broader.rule : choice.rule);
  part.node = el(
    'div',
    { class: 'approval-rule-part' },
    el('div', { class: 'approval-row' }, el('label', { for: id }, label), field),
    choice.broader ? scopeChoice(part, choice.broader, label, id) : null,
    part.marked.line,
  );
  return part;
}

// The rules' part of a card, and what it keeps: `chosen()` the rules to send (the fields that
// are not empty), `restore(field)` puts back the suggested text of an edited field (Esc), and
// says whether it did.
export function ruleChoices(approval, prefix, cwd) {
  const hintId = `${prefix}-rule-hint`;
  const list = suggestions(approval);
  const parts = list.map((choice, index) => rulePart(choice, index, list.length, prefix, hintId));
  const several = parts.length > 1;
  const hint = el(
    'p',
    { class: 'approval-hint', id: hintId },
    several
      ? `One rule for each part of the command that asks, each kept by “Allow in this conversation” and “Always allow” (this agent in ${cwd}). `
      : `Kept by “Allow in this conversation” and “Always allow” (this agent in ${cwd}). `,
    el('code', {}, '*'),
    ' matches any text, ',
    el('code', {}, '?'),
    ' one character.',
  );
  return {
    node: el('div', { class: 'approval-rules' }, parts.map((part) => part.node), hint),
    chosen: () => parts.map((part) => part.field.value.trim()).filter(Boolean),
    owns: (field) => parts.some((part) => part.field === field),
    restore(field) {
      const part = parts.find((candidate) => candidate.field === field);
      if (!part || field.value === part.suggested()) return false;
      field.value = part.suggested();
      part.marked.update();
      return true;
    },
  };
}
