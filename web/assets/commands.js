// The repository's commands (`.agents/commands/`, and the user's own) in the message box:
// typing `/` at the start lists the commands of the conversation's working directory (name,
// argument hint, description) to complete with ↑/↓ and Enter or Tab; a message written as
// `/name arguments` naming one is sent as `{"command", "arguments"}`, so the service expands
// the prompt and keeps the name. The list is read again each time it opens: a command edited
// in the repository shows at once.

import { api } from './api.js';
import { $, el } from './dom.js';
import { state } from './state.js';

// By working directory ('' for the service's own): the last list read.
const known = new Map();
let shown = [];
let active = 0;
let reading = 0;

// The directory the next message goes to.
function currentCwd() {
  if (state.view === 'conversation' && state.conv) return state.conv.cwd;
  return $('cwd').value.trim();
}

async function read(cwd) {
  const query = cwd ? `?cwd=${encodeURIComponent(cwd)}` : '';
  const list = await api('GET', `/api/commands${query}`);
  known.set(cwd, list.commands);
  return list.commands;
}

// What the box is while a command's name is being typed: the part after `/`, else null.
function typedName() {
  const match = /^\/([a-z0-9_-]*)$/.exec($('message').value);
  return match ? match[1] : null;
}

function close() {
  shown = [];
  const list = $('command-list');
  list.hidden = true;
  list.replaceChildren();
  const box = $('message');
  box.removeAttribute('aria-activedescendant');
}

function draw() {
  const list = $('command-list');
  const box = $('message');
  if (!shown.length) return close();
  list.replaceChildren(
    ...shown.map((command, at) =>
      el(
        'li',
        {
          id: `command-option-${at}`,
          role: 'option',
          class: 'command-option',
          'aria-selected': at === active ? 'true' : 'false',
          onmousedown: (event) => {
            // Keeps the focus in the box.
            event.preventDefault();
            complete(command);
          },
        },
        el('span', { class: 'command-name' }, `/${command.name}`),
        command.argument_hint ? el('span', { class: 'command-hint' }, ` ${command.argument_hint}`) : null,
        command.description ? el('span', { class: 'command-description' }, command.description) : null,
      ),
    ),
  );
  list.hidden = false;
  box.setAttribute('aria-activedescendant', `command-option-${active}`);
  list.children[active].scrollIntoView({ block: 'nearest' });
}

// Puts `/name ` in the box, ready for the arguments.
function complete(command) {
  const box = $('message');
  box.value = `/${command.name} `;
  box.setSelectionRange(box.value.length, box.value.length);
  close();
}

// After each change of the box: the list opens, narrows or closes.
async function update() {
  const name = typedName();
  if (name === null) return close();
  const cwd = currentCwd();
  const turn = ++reading;
  let commands = known.get(cwd);
  // Read afresh when the list opens; narrowing it uses what was read.
  if (!commands || name === '') {
    try {
      commands = await read(cwd);
    } catch {
      commands = [];
    }
  }
  if (turn !== reading || typedName() === null) return;
  const current = typedName();
  shown = commands.filter((command) => command.name.startsWith(current));
  active = 0;
  draw();
}

// A key pressed in the box while the list is open; true when the list took it.
export function commandKey(event) {
  if (!shown.length) return false;
  if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
    const step = event.key === 'ArrowDown' ? 1 : shown.length - 1;
    active = (active + step) % shown.length;
    draw();
  } else if ((event.key === 'Enter' && !event.shiftKey) || event.key === 'Tab') {
    complete(shown[active]);
  } else if (event.key === 'Escape') {
    close();
  } else {
    return false;
  }
  event.preventDefault();
  event.stopPropagation();
  return true;
}

// The request's fields for `text` when it names a command of `cwd`: `{command, arguments?}`;
// null for a plain message (a `/word` no command has is sent as typed).
export async function asCommand(text, cwd) {
  const match = /^\/([a-z0-9_-]+)(?:\s+([\s\S]*))?$/.exec(text.trim());
  if (!match) return null;
  let commands = known.get(cwd || '');
  if (!commands || !commands.some((command) => command.name === match[1])) {
    try {
      commands = await read(cwd || '');
    } catch {
      return null;
    }
  }
  if (!commands.some((command) => command.name === match[1])) return null;
  const fields = { command: match[1] };
  if (match[2] && match[2].trim()) fields.arguments = match[2].trim();
  return fields;
}

export function wireCommands() {
  const box = $('message');
  box.setAttribute('aria-autocomplete', 'list');
  box.setAttribute('aria-controls', 'command-list');
  box.addEventListener('input', update);
  box.addEventListener('blur', close);
}
