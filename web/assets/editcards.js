// The cards of the edit tools: `edit_file`, `apply_patch` (a whole V4A patch, or one file's
// operation from OpenAI's built-in tool) and Anthropic's text editor
// (`str_replace_based_edit_tool`). Each shows, per file, what the call changed as a line diff,
// read from its arguments: the replaced text and its replacement, or the patch's own lines.

import { el, plural } from './dom.js';
import { diffBlock, isNoNewlineLine, lineDiffRows, splitLines } from './diffview.js';

export const EDIT_TOOLS = ['edit_file', 'apply_patch', 'str_replace_based_edit_tool'];

// Whether the call changes files (the text editor's `view` only reads).
export function isEdit(name, args) {
  if (name === 'str_replace_based_edit_tool') return args.command !== 'view';
  return EDIT_TOOLS.includes(name);
}

// The files a call changes, each `{ path, action, rows, added, removed }`.
export function editedFiles(name, args) {
  const text = (value) => (typeof value === 'string' ? value : '');
  if (name === 'edit_file') return [replacement(args.path, text(args.old_string), text(args.new_string))];
  if (name === 'str_replace_based_edit_tool') {
    if (args.command === 'str_replace') return [replacement(args.path, text(args.old_str), text(args.new_str))];
    if (args.command === 'create') return [added(args.path, text(args.file_text), 'created')];
    if (args.command === 'insert') return [added(args.path, text(args.insert_text), `inserted after line ${args.insert_line}`)];
    return [];
  }
  if (name === 'apply_patch') {
    if (args.operation && typeof args.operation === 'object') return [operationFile(args.operation)];
    return patchFiles(text(args.input));
  }
  return [];
}

function replacement(path, before, after) {
  return { path: String(path || ''), action: 'edited', ...lineDiffRows(before, after) };
}

function added(path, text, action) {
  const rows = splitLines(text).map((line) => ['add', line]);
  return { path: String(path || ''), action, rows, added: rows.length, removed: 0 };
}

// One file of OpenAI's built-in tool: `create_file` (every line `+`), `update_file` (hunks) or
// `delete_file`.
function operationFile(operation) {
  const path = String(operation.path || '');
  if (operation.type === 'delete_file') return { path, action: 'deleted', rows: [], added: 0, removed: 0 };
  const file = { path, action: operation.type === 'create_file' ? 'created' : 'edited', rows: [], added: 0, removed: 0 };
  for (const line of splitLines(String(operation.diff || ''))) hunkLine(file, line);
  return file;
}

// The files of a whole patch (`*** Begin Patch` … `*** End Patch`).
function patchFiles(patch) {
  const files = [];
  let file = null;
  for (const line of splitLines(patch.replace(/\r\n/g, '\n'))) {
    const header = /^\*\*\* (Add|Update|Delete) File: (.*)$/.exec(line);
    if (header) {
      const action = { Add: 'created', Update: 'edited', Delete: 'deleted' }[header[1]];
      file = { path: header[2].trim(), action, rows: [], added: 0, removed: 0 };
      files.push(file);
      continue;
    }
    const move = /^\*\*\* Move to: (.*)$/.exec(line);
    if (move && file) {
      file.action = `moved to ${move[1].trim()}`;
      continue;
    }
    if (line.startsWith('***') || !file) continue;
    hunkLine(file, line);
  }
  return files;
}

function hunkLine(file, line) {
  const last = file.rows[file.rows.length - 1];
  if (isNoNewlineLine(line) && last) {
    // "\ No newline at end of file": a mark on the line before.
    last[2] = true;
  } else if (line.startsWith('@@')) {
    const anchor = line.slice(2).trim();
    if (anchor) file.rows.push(['fold', anchor]);
  } else if (line.startsWith('+')) {
    file.added += 1;
    file.rows.push(['add', line.slice(1)]);
  } else if (line.startsWith('-')) {
    file.removed += 1;
    file.rows.push(['del', line.slice(1)]);
  } else {
    file.rows.push(['same', line.startsWith(' ') ? line.slice(1) : line]);
  }
}

// The card's body: per file its path, what happened and its diff; a failed call its reason.
export function editBody(item, args, edit) {
  if (item.status === 'failed' || item.status === 'interrupted') {
    const reason = (item.output || 'not applied').split('\n')[0];
    edit.lines = 0;
    return [el('div', { class: 'tool-summary' }, el('span', { class: item.denied === true ? 'tool-denied' : 'tool-error' }, reason))];
  }
  const nodes = [];
  let lines = 0;
  for (const file of editedFiles(item.name, args)) {
    // As a write's card counts: `+a −r lines`.
    const counts = file.added || file.removed ? ` · +${file.added} −${file.removed} lines` : '';
    nodes.push(el('div', { class: 'tool-summary' }, el('code', {}, file.path), ` ${file.action}${counts}`));
    nodes.push(diffBlock(file.rows, `Changes to ${file.path || 'the file'}`));
    lines += file.rows.length;
  }
  if (!nodes.length) nodes.push(el('div', { class: 'tool-summary' }, item.output || 'no change'));
  edit.lines = lines;
  nodes.push(el('button', { type: 'button', class: 'show-all link-button', hidden: true }));
  return nodes;
}

// What the card's head names: the file, or how many files a patch changes.
export function editSubject(name, args) {
  const files = editedFiles(name, args);
  if (files.length === 1) return files[0].path;
  return plural(files.length, 'file');
}
