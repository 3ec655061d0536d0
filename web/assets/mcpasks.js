// What an MCP server asks while one of its tool calls runs; both come as approvals.
//
// A question (`mcp_question`, MCP elicitation) is a form: the server's message, then one
// labelled control per field of its schema, in the schema's order: a list for a choice (`enum`),
// a checkbox for true or false, a number field for a number (with its bounds), a text field
// otherwise. Required fields are marked, defaults filled in. Submit sends the values typed as
// the schema says (numbers as numbers, a field left empty left out); Decline declines. The
// service checks the answer: its refusal names the field, which is marked and focused, and
// everything typed stays.
//
// A request to use the agent's model (`mcp_sampling`, MCP sampling) shows the server, the system
// prompt and the messages it would send, and how long an answer it wants.

import { el } from './dom.js';
import { markInvisible, visibleText } from './visible.js';

export const isQuestion = (approval) => approval.tool === 'mcp_question';
export const isSampling = (approval) => approval.tool === 'mcp_sampling';

export function serverName(approval) {
  if (isQuestion(approval)) return (approval.question && approval.question.server) || 'an MCP server';
  const args = (approval.subject && approval.subject.arguments) || {};
  return args.server || 'an MCP server';
}

function samplingArgs(approval) {
  const args = (approval.subject && approval.subject.arguments) || {};
  return { ...args, messages: Array.isArray(args.messages) ? args.messages : [] };
}

// What it asks, in one line of plain text (invisible characters written out): for the card's
// name, announcements and the Agents tab. Null for any other approval.
export function askText(approval) {
  if (isQuestion(approval)) return `Question from the MCP server ${serverName(approval)}: ${visibleText((approval.question && approval.question.message) || '')}`;
  if (isSampling(approval)) {
    const first = samplingArgs(approval).messages[0];
    return `The MCP server ${serverName(approval)} asks to use the model${first ? `: ${visibleText(String(first.text || ''))}` : ''}`;
  }
  return null;
}

// ------------------------------------------------------------------------------------------------
// A question's form.

const ROLES = { user: 'User', assistant: 'Assistant' };

function label(name, spec) {
  return spec.title || name;
}

// What a field takes, in words, under it: its description, bounds and format.
function hintText(spec, kind) {
  const parts = [];
  if (spec.description) parts.push(/[.!?:]$/.test(spec.description.trim()) ? spec.description.trim() : `${spec.description.trim()}.`);
  const limits = [];
  if (kind === 'integer') limits.push('a whole number');
  const min = typeof spec.minimum === 'number' ? spec.minimum : null;
  const max = typeof spec.maximum === 'number' ? spec.maximum : null;
  if (min !== null && max !== null) limits.push(`from ${min} to ${max}`);
  else if (min !== null) limits.push(`at least ${min}`);
  else if (max !== null) limits.push(`at most ${max}`);
  if (typeof spec.minLength === 'number' && typeof spec.maxLength === 'number') limits.push(`${spec.minLength} to ${spec.maxLength} characters`);
  else if (typeof spec.minLength === 'number') limits.push(`at least ${spec.minLength} characters`);
  else if (typeof spec.maxLength === 'number') limits.push(`at most ${spec.maxLength} characters`);
  const formats = { email: 'an email address', uri: 'a web address', date: 'a date', 'date-time': 'a date and time (2025-01-31T14:00:00Z)' };
  if (spec.format && formats[spec.format]) limits.push(formats[spec.format]);
  if (limits.length) parts.push(`${limits.join(', ').replace(/^./, (c) => c.toUpperCase())}.`);
  return parts.join(' ');
}

const INPUT_TYPES = { email: 'email', uri: 'url', date: 'date' };

// One field: its node, its control, and how it reads and restores its value.
function field(name, spec, required, id) {
  const kind = Array.isArray(spec.enum) ? 'enum' : ['boolean', 'number', 'integer'].includes(spec.type) ? spec.type : 'string';
  const hint = hintText(spec, spec.type);
  const hintId = hint ? `${id}-hint` : null;
  const title = label(name, spec);
  const mark = required && kind !== 'boolean' ? el('span', { class: 'question-required', 'aria-hidden': 'true' }, ' (required)') : null;
  const common = { id, name, 'aria-describedby': hintId, required: required && kind !== 'boolean' };
  let control;
  if (kind === 'enum') {
    const names = Array.isArray(spec.enumNames) ? spec.enumNames : [];
    const chosen = spec.enum.findIndex((value) => value === spec.default);
    control = el(
      'select',
      common,
      chosen < 0 ? el('option', { value: '' }, required ? 'Choose…' : '(no answer)') : null,
      spec.enum.map((value, index) => el('option', { value: String(index), selected: index === chosen }, String(names[index] ?? value))),
    );
  } else if (kind === 'boolean') {
    control = el('input', { ...common, type: 'checkbox', checked: spec.default === true });
  } else if (kind === 'number' || kind === 'integer') {
    control = el('input', {
      ...common,
      type: 'number',
      inputmode: kind === 'integer' ? 'numeric' : 'decimal',
      step: kind === 'integer' ? '1' : 'any',
      min: typeof spec.minimum === 'number' ? String(spec.minimum) : null,
      max: typeof spec.maximum === 'number' ? String(spec.maximum) : null,
      value: typeof spec.default === 'number' ? String(spec.default) : null,
      autocomplete: 'off',
    });
  } else {
    control = el('input', {
      ...common,
      type: INPUT_TYPES[spec.format] || 'text',
      maxLength: typeof spec.maxLength === 'number' ? spec.maxLength : null,
      value: typeof spec.default === 'string' ? spec.default : null,
      autocomplete: 'off',
      spellcheck: false,
    });
  }
  const initial = kind === 'boolean' ? control.checked : control.value;
  const node =
    kind === 'boolean'
      ? el('div', { class: 'question-field question-check' }, el('label', { for: id }, control, ' ', title), hint ? el('p', { class: 'question-hint', id: hintId }, hint) : null)
      : el(
          'div',
          { class: 'question-field' },
          el('label', { for: id }, title, mark),
          control,
          hint ? el('p', { class: 'question-hint', id: hintId }, hint) : null,
        );
  return {
    name,
    spec,
    kind,
    required,
    title,
    control,
    node,
    hintId,
    // { value } to send, {} to leave out, or { problem } said before anything is sent.
    read() {
      if (kind === 'boolean') return { value: control.checked };
      if (kind === 'enum') {
        if (control.value === '') return required ? { problem: `${title} needs an answer.` } : {};
        return { value: spec.enum[Number(control.value)] };
      }
      if (kind === 'number' || kind === 'integer') {
        if (control.validity.badInput) return { problem: `${title} must be a number.` };
        if (control.value.trim() === '') return required ? { problem: `${title} needs an answer.` } : {};
        return { value: Number(control.value) };
      }
      if (control.value === '') return required ? { problem: `${title} needs an answer.` } : {};
      return { value: control.value };
    },
    // Esc: back to what it held at first; says whether anything changed.
    restore() {
      if (kind === 'boolean' || control.value === initial) return false;
      control.value = initial;
      return true;
    },
  };
}

// The form's fields. `errorId`: the card's error line, which a field found wrong points to.
// Returns { node, first(), read(), owns(control), restore(control), showProblem(message) }.
export function questionFields(approval, prefix, errorId) {
  const schema = (approval.question && approval.question.schema) || {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields = Object.entries(schema.properties || {}).map(([name, spec], index) =>
    field(name, spec && typeof spec === 'object' ? spec : {}, required.has(name), `${prefix}-field-${index}`),
  );
  const clearInvalid = () => {
    for (const one of fields) {
      one.control.removeAttribute('aria-invalid');
      if (one.hintId) one.control.setAttribute('aria-describedby', one.hintId);
      else one.control.removeAttribute('aria-describedby');
    }
  };
  const markInvalid = (one) => {
    one.control.setAttribute('aria-invalid', 'true');
    one.control.setAttribute('aria-describedby', [errorId, one.hintId].filter(Boolean).join(' '));
    one.control.focus();
  };
  return {
    node: fields.length ? el('div', { class: 'question-fields' }, fields.map((one) => one.node)) : null,
    first: () => (fields.length ? fields[0].control : null),
    // { content } to send, or { problem, field } when something must be answered first.
    read() {
      clearInvalid();
      const content = {};
      for (const one of fields) {
        const read = one.read();
        if (read.problem) return { problem: read.problem, field: one };
        if ('value' in read) content[one.name] = read.value;
      }
      return { content };
    },
    owns: (control) => fields.some((one) => one.control === control),
    restore(control) {
      const one = fields.find((candidate) => candidate.control === control);
      return !!one && one.restore();
    },
    // A problem with the answer: the field it names (`name` in backticks, as the service
    // writes it, or the field found before sending) is marked and takes the focus.
    showProblem(message, known) {
      clearInvalid();
      const named = known || fields.find((one) => message.includes(`\`${one.name}\``));
      if (named) markInvalid(named);
    },
  };
}

// The values a question was answered with, in the schema's order, in words:
// "Environment: production; Replicas: 3; Run the migrations too: yes".
export function answerSummary(approval, content) {
  if (!content || typeof content !== 'object') return null;
  const properties = (approval.question && approval.question.schema && approval.question.schema.properties) || {};
  const names = [...Object.keys(properties).filter((name) => name in content), ...Object.keys(content).filter((name) => !(name in properties))];
  if (!names.length) return null;
  return names
    .map((name) => {
      const spec = properties[name] || {};
      const value = content[name];
      let shown = typeof value === 'boolean' ? (value ? 'yes' : 'no') : String(value);
      if (Array.isArray(spec.enum) && Array.isArray(spec.enumNames)) {
        const index = spec.enum.indexOf(value);
        if (index >= 0 && spec.enumNames[index] !== undefined) shown = String(spec.enumNames[index]);
      }
      return `${label(name, spec)}: ${shown}`;
    })
    .join('; ');
}

// ------------------------------------------------------------------------------------------------
// A request to use the model: its details' rows, [term, value].

export function samplingRows(approval) {
  const args = samplingArgs(approval);
  const rows = [['Server', el('span', {}, serverName(approval))]];
  if (args.system_prompt) rows.push(['System prompt', el('pre', { class: 'approval-subject' }, markInvisible(String(args.system_prompt)).nodes)]);
  rows.push([
    args.messages.length === 1 ? 'Message' : 'Messages',
    el(
      'ol',
      { class: 'sampling-messages' },
      args.messages.map((message) =>
        el(
          'li',
          {},
          el('span', { class: 'sampling-role' }, ROLES[message.role] || String(message.role || '')),
          el('pre', { class: 'approval-subject' }, markInvisible(String(message.text ?? '')).nodes),
        ),
      ),
    ),
  ]);
  if (typeof args.max_tokens === 'number') rows.push(['Answer of at most', el('span', {}, `${args.max_tokens.toLocaleString('en-US')} tokens`)]);
  return rows;
}
