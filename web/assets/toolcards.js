// Tool calls as cards people read: a shell call shows its command and its live output; the file
// tools show their path and a summary, a write shows what it changed (a line diff against the
// file as this conversation last saw it); an MCP server's tool shows the server, the arguments
// and the result, JSON folded. Each card says whether the tool ran, failed (with its exit code),
// was denied (by the rules or a user), was interrupted or waits for approval. Long output is
// collapsed, with "Show all".

import { diffBlock, lineDiffRows } from './diffview.js';
import { el, formatBytes, imageList, lineCount, plural } from './dom.js';
import { editBody, editSubject, isEdit } from './editcards.js';
import { readText } from './filecontents.js';
import { markInvisible } from './visible.js';
import { hookRuns } from './hookruns.js';
import { firstWords, state as pageState, subAgentName, withNames } from './state.js';

// Output longer than this many lines is collapsed until the reader asks for all of it.
const COLLAPSED_LINES = 12;

const TITLES = {
  shell: 'Shell',
  read_file: 'Read file',
  write_file: 'Write file',
  edit_file: 'Edit file',
  apply_patch: 'Apply patch',
  str_replace_based_edit_tool: 'Edit file',
  grep: 'Search files',
  glob: 'Find files',
  list_dir: 'List directory',
  spawn_agent: 'Sub-agent',
  send_message: 'Message to a sub-agent',
  wait_agents: 'Wait for sub-agents',
  interrupt_agent: 'Interrupt a sub-agent',
  list_agents: 'List sub-agents',
  update_plan: 'Update plan',
};

// An MCP server's tool reaches the model as `mcp__<server>__<tool>` (a server's name has no `__`).
export function mcpTool(name) {
  const match = /^mcp__(.+?)__(.+)$/.exec(name || '');
  return match ? { server: match[1], tool: match[2] } : null;
}

export function toolTitle(name) {
  const mcp = mcpTool(name);
  if (mcp) return `${mcp.tool} (MCP ${mcp.server})`;
  return TITLES[name] || name;
}

// `context.time`: the card's time element; `context.badge`: a badge after its state (compacted); `context.knownContent(path, seq)`: what the file
// held before this call, as far as the conversation shows (null when unknown);
// `context.previous`: the card this one replaces, if any.
export function renderToolCall(item, classes, context) {
  const args = item.arguments || {};
  const name = item.name;
  const state = toolState(item);
  const head = el(
    'div',
    { class: 'tool-head' },
    el('span', { class: 'tool-name' }, mcpTool(name) ? mcpTool(name).tool : toolTitle(name)),
    subject(name, args, item),
    el('span', { class: `tool-state state-${state.kind}` }, state.kind === 'running' ? el('span', { class: 'spinner' }) : null, state.label),
    context.badge,
    context.time,
  );
  const kindClass = mcpTool(name) ? 'tool-mcp' : `tool-${name.replace(/_/g, '-')}`;
  const card = el('div', { class: `${classes} ${kindClass} state-${state.kind}`, 'data-seq': item.seq }, head);
  // The hooks that ran for it, right under its head: they decided whether and how it ran.
  const hooks = hookRuns(item.hooks);
  if (hooks) card.append(hooks);
  let lines;
  if (name === 'spawn_agent') {
    card.append(...spawnBody(item, args));
    lines = 0;
  } else if (AGENT_TOOLS.has(name)) {
    card.append(...agentToolBody(item, args));
    lines = 0;
  } else if (name === 'update_plan') {
    // The plan shows as the plan item after the call: the card says only how it went.
    const summary = outputSummary(item, args) || (item.status === 'completed' ? item.output : null);
    if (summary) card.append(el('div', { class: 'tool-summary' }, summary));
    lines = 0;
  } else if (name === 'write_file') {
    const write = {};
    card.append(...writeBody(item, args, context, write));
    lines = write.lines || 0;
  } else if (isEdit(name, args)) {
    const edit = {};
    card.append(...editBody(item, args, edit));
    lines = edit.lines || 0;
  } else {
    const summary = outputSummary(item, args);
    if (summary) card.append(el('div', { class: 'tool-summary' }, summary));
    if (!['shell', 'read_file', 'list_dir'].includes(name)) card.append(argumentList(args));
    const folded = mcpTool(name) && item.status !== 'running' ? foldedJson(item.output || '') : null;
    // Images a tool returned (an MCP tool's) show below its output.
    const images = imageList(item.images, `image returned by ${toolTitle(name)}`);
    if (folded) {
      card.append(folded);
      if (images) card.append(images);
      setUpCollapse(card, 0, context.previous);
      return card;
    }
    card.append(...outputBlock(item.output || '', name === 'shell' ? 'tail' : 'head', item.status === 'running' && name !== 'shell'));
    if (images) card.append(images);
    lines = lineCount(item.output || '');
  }
  setUpCollapse(card, lines, context.previous);
  return card;
}

// Live output of a running call.
export function appendToolOutput(card, delta) {
  const output = card.querySelector('pre.output');
  if (!output) return;
  output.hidden = false;
  output.append(delta);
  card.lines = (card.lines || 0) + (delta.match(/\n/g) || []).length;
  updateCollapse(card, output);
  if (output.classList.contains('from-tail')) output.scrollTop = output.scrollHeight;
}

function toolState(item) {
  const exit = item.exit_code;
  if (item.status === 'running') return { kind: 'running', label: 'running' };
  if (item.status === 'waiting_approval') return { kind: 'waiting', label: 'waiting for approval' };
  if (item.status === 'interrupted') return { kind: 'interrupted', label: 'interrupted' };
  // Refused by the rules, or denied by a user: a decision, not an error of the tool.
  if (item.denied === true) return { kind: 'denied', label: 'denied' };
  if (exit !== null && exit !== undefined && exit !== 0) return { kind: 'failed', label: `failed · exit ${exit}` };
  if (item.status === 'failed') return { kind: 'failed', label: 'failed' };
  if (exit === 0) return { kind: 'ran', label: 'ran · exit 0' };
  return { kind: 'ran', label: 'done' };
}

// What a spawn answered once the sub-agent exists ({session_id, model, …}), else null.
function spawned(item) {
  try {
    const started = JSON.parse(item.output || 'null');
    return started && started.session_id ? started : null;
  } catch {
    return null;
  }
}

// A session the page knows, by its name; a sub-agent the page does not list (yet) by its agent.
function agentName(sessionId, fallback) {
  return pageState.sessions.some((s) => s.id === sessionId) ? subAgentName(sessionId) : fallback || 'a sub-agent';
}

// The tools by which an agent talks to its sub-agents: their cards name the sub-agents, and say
// what came back in words, not as JSON with session ids.
const AGENT_TOOLS = new Set(['send_message', 'wait_agents', 'interrupt_agent', 'list_agents']);

const AGENT_STATUS = { running: 'working', idle: 'idle', completed: 'done', failed: 'failed', interrupted: 'interrupted' };

function agentToolBody(item, args) {
  const nodes = [];
  if (item.name === 'send_message' && args.text !== undefined) {
    nodes.push(el('div', { class: 'tool-task' }, String(args.text), args.mode ? el('span', { class: 'muted' }, ` (${args.mode})`) : null));
  }
  if (item.status === 'running' || item.status === 'waiting_approval' || !item.output) return nodes;
  let answer = null;
  try {
    answer = JSON.parse(item.output);
  } catch {
    answer = null;
  }
  if (!answer || typeof answer !== 'object' || item.status === 'failed') {
    nodes.push(el('div', { class: 'tool-summary' }, el('span', { class: failureClass(item) }, withNames(item.output.split('\n')[0]))));
    return nodes;
  }
  if (item.name === 'send_message') {
    nodes.push(el('div', { class: 'tool-summary' }, answer.status === 'started' ? 'delivered: it started a turn' : answer.status ? `delivered (${answer.status})` : 'delivered'));
  } else if (item.name === 'interrupt_agent') {
    nodes.push(el('div', { class: 'tool-summary' }, answer.interrupted ? 'interrupted' : 'it was not working: nothing to interrupt'));
  } else if (Array.isArray(answer.agents)) {
    const waited = item.name === 'wait_agents' && typeof answer.waited_s === 'number' ? `waited ${answer.waited_s} s${answer.timed_out ? ', then stopped waiting' : ''} · ` : '';
    nodes.push(el('div', { class: 'tool-summary' }, `${waited}${plural(answer.agents.length, 'sub-agent')}`));
    if (answer.agents.length) {
      nodes.push(
        el(
          'ul',
          { class: 'tool-agents' },
          answer.agents.map((agent) => {
            const fallback = `${agent.agent || 'sub-agent'}${agent.task ? ` · ${firstWords(agent.task)}` : ''}`;
            const last = agent.last_message ? String(agent.last_message).split('\n').find((line) => line.trim()) : '';
            return el(
              'li',
              {},
              el('span', { class: 'tool-agent-name' }, agentName(agent.session_id, fallback)),
              ` — ${AGENT_STATUS[agent.status] || agent.status || 'unknown'}`,
              last ? el('span', { class: 'muted' }, ` · ${last.length > 120 ? `${last.slice(0, 119)}…` : last}`) : null,
            );
          }),
        ),
      );
    }
  }
  return nodes;
}

// A spawn: the task given, and a way to the sub-agent once it exists.
function spawnBody(item, args) {
  const nodes = [el('div', { class: 'tool-task' }, String(args.task || ''))];
  const started = spawned(item);
  if (started) {
    nodes.push(
      el(
        'div',
        { class: 'tool-summary' },
        `started${started.model ? ` on ${started.model}` : ''} · `,
        el('button', {
          type: 'button',
          class: 'link-button open-session',
          text: 'Open the sub-agent',
          onclick: () => document.dispatchEvent(new CustomEvent('show-session', { detail: started.session_id })),
        }),
      ),
    );
  } else if (item.status !== 'running' && item.output) {
    nodes.push(el('div', { class: 'tool-summary' }, el('span', { class: 'tool-error' }, item.output.split('\n')[0])));
  }
  return nodes;
}

// An MCP result that is JSON (a tool's structured content) as a folded, indented block.
function foldedJson(output) {
  let value;
  try {
    value = JSON.parse(output);
  } catch {
    return null;
  }
  if (value === null || typeof value !== 'object') return null;
  const text = JSON.stringify(value, null, 2);
  return el('details', { class: 'tool-json' }, el('summary', {}, `JSON result · ${plural(lineCount(text), 'line')}`), el('pre', { class: 'output' }, text));
}

function subject(name, args, item) {
  const mcp = mcpTool(name);
  if (mcp) return el('span', { class: 'tool-subject tool-server' }, `MCP server ${mcp.server}`);
  if (name === 'spawn_agent') {
    const started = spawned(item);
    const fallback = `${args.agent || 'sub-agent'}${args.task ? ` · ${firstWords(args.task)}` : ''}`;
    return el('span', { class: 'tool-subject agent-subject' }, started ? agentName(started.session_id, fallback) : fallback);
  }
  if (name === 'send_message' || name === 'interrupt_agent') return el('span', { class: 'tool-subject agent-subject' }, agentName(args.session_id));
  if (name === 'wait_agents') {
    const ids = Array.isArray(args.session_ids) ? args.session_ids : [];
    return el('span', { class: 'tool-subject agent-subject' }, ids.length ? ids.map((id) => agentName(id)).join(', ') : 'every sub-agent');
  }
  if (name === 'shell') return el('code', { class: 'tool-subject' }, '$ ', marked(args.command === undefined ? '' : args.command));
  if (name === 'read_file' || name === 'write_file') return el('code', { class: 'tool-subject' }, marked(args.path || ''));
  if (name === 'list_dir') return el('code', { class: 'tool-subject' }, args.path ? marked(args.path) : 'working directory');
  if (name === 'grep' || name === 'glob') return el('code', { class: 'tool-subject' }, marked(args.pattern || ''));
  if (name === 'str_replace_based_edit_tool' && args.command === 'view') return el('code', { class: 'tool-subject' }, marked(args.path || ''));
  if (isEdit(name, args)) return el('code', { class: 'tool-subject' }, marked(editSubject(name, args)));
  return null;
}

// A command or path as the approval card shows it: its invisible characters marked.
function marked(text) {
  return markInvisible(String(text)).nodes;
}

// Why a call did not run reads as an error, unless it was denied: that was a decision.
function failureClass(item) {
  return item.denied === true ? 'tool-denied' : 'tool-error';
}

function outputSummary(item, args) {
  const output = item.output || '';
  if (item.status === 'running' || item.status === 'waiting_approval') return null;
  if (item.status === 'failed' || item.status === 'interrupted') {
    if (item.name === 'shell' || !output) return null;
    return el('span', { class: failureClass(item) }, output.split('\n')[0]);
  }
  if (item.name === 'read_file') {
    const read = readText(output);
    if (item.images && item.images.length) return output.split('\n')[0];
    return `${plural(read.lines, 'line')} · ${formatBytes(new TextEncoder().encode(read.text).length)}${read.whole ? '' : ' (part of the file)'}`;
  }
  if (item.name === 'list_dir') {
    if (output === '(empty directory)') return 'empty directory';
    const names = output.split('\n').filter(Boolean);
    const folders = names.filter((n) => n.endsWith('/')).length;
    return `${plural(names.length, 'entry', 'entries')} (${plural(folders, 'folder')}, ${plural(names.length - folders, 'file')})`;
  }
  if (item.name === 'shell' && !output) return 'no output';
  return null;
}

// The output, collapsed when long: a shell's keeps its last lines in view, a file's its first.
function outputBlock(output, keep, hideWhileRunning) {
  const pre = el('pre', { class: `output from-${keep}` }, output);
  pre.hidden = !output || hideWhileRunning;
  return [pre, el('button', { type: 'button', class: 'show-all link-button', hidden: true })];
}

// Wires a built card's "Show all" button; a card that replaces an expanded one stays expanded.
function setUpCollapse(card, lines, previous) {
  const pre = card.querySelector('pre.output');
  const toggle = card.querySelector('button.show-all');
  if (!pre || !toggle) return;
  card.lines = lines;
  card.expanded = !!(previous && previous.expanded);
  toggle.addEventListener('click', () => {
    card.expanded = !card.expanded;
    updateCollapse(card, pre);
    if (pre.classList.contains('from-tail')) pre.scrollTop = pre.scrollHeight;
  });
  updateCollapse(card, pre);
}

// A shell's output shows its end: scrolled there once the card is on the page.
export function showOutputEnd(card) {
  const pre = card.querySelector('pre.output.from-tail');
  if (pre) pre.scrollTop = pre.scrollHeight;
}

function updateCollapse(card, pre) {
  const toggle = card.querySelector('button.show-all');
  const long = (card.lines || 0) > COLLAPSED_LINES;
  pre.classList.toggle('collapsed', long && !card.expanded);
  pre.classList.toggle('expanded', long && !!card.expanded);
  if (!toggle) return;
  toggle.hidden = !long;
  toggle.textContent = card.expanded ? 'Show less' : `Show all ${plural(card.lines, 'line')}`;
  toggle.setAttribute('aria-expanded', String(!!card.expanded));
}

function writeBody(item, args, context, write) {
  const content = typeof args.content === 'string' ? args.content : '';
  if (item.status === 'failed' || item.status === 'interrupted') {
    return [el('div', { class: 'tool-summary' }, el('span', { class: failureClass(item) }, (item.output || 'not written').split('\n')[0]))];
  }
  const before = context.knownContent(String(args.path || ''), item.seq);
  let rows = [];
  let added = 0;
  let removed = 0;
  if (before === null) {
    // Every line added (and a last one without a newline marked).
    ({ rows } = lineDiffRows('', content, { wholeFiles: true }));
    added = rows.length;
  } else {
    ({ rows, added, removed } = lineDiffRows(before, content, { wholeFiles: true }));
  }
  const summary =
    before === null
      ? `${plural(lineCount(content), 'line')} written · ${formatBytes(new TextEncoder().encode(content).length)} (what the file held before is not in this conversation)`
      : added === 0 && removed === 0
        ? 'no change'
        : `+${added} −${removed} lines`;
  const pre = diffBlock(rows, `Changes to ${args.path || 'the file'}`);
  const toggle = el('button', { type: 'button', class: 'show-all link-button', hidden: true });
  write.lines = rows.length;
  return [el('div', { class: 'tool-summary' }, summary), pre, toggle];
}


function argumentList(args) {
  const entries = Object.entries(args);
  if (!entries.length) return el('div', { class: 'tool-args muted' }, 'no arguments');
  return el(
    'dl',
    { class: 'tool-args' },
    entries.map(([key, value]) => [el('dt', {}, key), el('dd', {}, typeof value === 'string' ? value : JSON.stringify(value))]),
  );
}
