// The open conversation's background processes (`shell` calls with `background: true`): a panel
// above the message box once it has any, running or ended. Each shows its command, its status
// (running, exited N, stopped, lost, with the reason as small text), the TCP ports it listens on
// as links to this page's host, a Stop button while it runs, and its output's tail, folded until
// asked for. One output is open at a time: while its process runs it is followed on the
// output's event stream (one connection), closed when the output folds, the panel folds or the
// conversation closes.
//
// The list comes from GET …/processes when a conversation opens and whenever the list stream
// starts over; `process.started` and `process.ended` keep it. The ports a process opens later
// come with no event: while one runs, the list is read again after its output moves and every
// POLL_MS. Only status changes are announced to screen readers, never the output.

import { api, streamUrl } from './api.js';
import { $, el, enc, fullTime } from './dom.js';
import { showError } from './banners.js';
import { announce } from './announcer.js';
import { markInvisible, visibleText } from './visible.js';
import { state } from './state.js';

// How much of an output the panel keeps and reads back: its tail.
const TAIL_BYTES = 16 * 1024;
const TAIL_CHARS = 16 * 1024;
// While a process runs, the list (its ports) is read again this often, and at most this often
// after its output moved.
const POLL_MS = 10_000;
const REFRESH_AFTER_OUTPUT_MS = 1_500;
// A dropped output stream is opened again after this long, from where it stopped.
const RECONNECT_MS = 2_000;

let conversationId = null;
let processes = []; // ProcessInfo, in the order they started
let loads = 0;
let collapsed = false;
let openId = null; // the process whose output is shown
const outputs = new Map(); // process id → { text, next, earlier, read }
const stopping = new Set();
const rows = new Map(); // process id → its <li>
let follower = null; // { id, source } while an output is followed live
let reconnectTimer = null;
let pollTimer = null;
let refreshTimer = null;

const running = (process) => process.status === 'running';

// What a process's status reads as.
function statusText(process) {
  switch (process.status) {
    case 'running':
      return 'running';
    case 'exited':
      return process.exit_code === null || process.exit_code === undefined ? 'exited' : `exited ${process.exit_code}`;
    case 'killed':
      return 'stopped';
    case 'lost':
      return 'lost';
    default:
      return process.status;
  }
}

function shortCommand(command) {
  const first = visibleText(String(command).split('\n')[0]);
  return first.length > 60 ? `${first.slice(0, 59)}…` : first;
}

// Forgets the processes (another conversation, or none, is shown).
export function resetProcesses() {
  loads++;
  conversationId = null;
  processes = [];
  openId = null;
  collapsed = false;
  outputs.clear();
  stopping.clear();
  rows.clear();
  stopFollowing();
  clearTimeout(refreshTimer);
  refreshTimer = null;
  $('process-list').replaceChildren();
  renderProcesses();
}

// GET the open conversation's processes: the whole truth for it, but a process already known to
// have ended stays ended. `quiet`: a read again while something runs, whose failure the next
// one may mend (the page says when the service is gone by other means).
export async function loadProcesses(id, quiet = false) {
  if (id !== conversationId) {
    resetProcesses();
    conversationId = id;
  }
  const load = ++loads;
  let answer;
  try {
    answer = await api('GET', `/api/conversations/${enc(id)}/processes`);
  } catch (error) {
    // An older service has no processes to list; anything else is worth saying.
    if (load === loads && !quiet && error.status !== 404 && error.status !== 405) showError(error);
    return;
  }
  if (load !== loads || id !== conversationId) return;
  const first = !processes.length;
  const listed = answer.processes || [];
  const merged = listed.map((process) => {
    const known = processes.find((p) => p.id === process.id);
    return known && !running(known) && running(process) ? known : process;
  });
  // One whose start the list stream told while the answer was on its way stays.
  for (const known of processes) if (!listed.some((p) => p.id === known.id)) merged.push(known);
  merged.sort((a, b) => Date.parse(a.started_at) - Date.parse(b.started_at));
  processes = merged;
  if (first) collapsed = !processes.some(running);
  renderProcesses();
}

// A process started or ended (a list event, or the answer to a stop).
function noteProcess(process, announced) {
  if (process.conversation_id !== conversationId) return;
  const index = processes.findIndex((p) => p.id === process.id);
  const before = index >= 0 ? processes[index] : null;
  if (before && !running(before) && running(process)) return;
  if (index >= 0) processes[index] = process;
  else processes.push(process);
  if (!before && running(process)) collapsed = false;
  if (announced && (!before || before.status !== process.status)) {
    announce(running(process) ? `Background process started: ${shortCommand(process.command)}` : `Background process ${statusText(process)}: ${shortCommand(process.command)}`);
  }
  renderProcesses();
}

// The list stream tells of every conversation's processes; after its first snapshot, a snapshot
// means it started over and may have missed some.
export function followProcesses(stream) {
  let snapshots = 0;
  stream.addEventListener('snapshot', () => {
    if (snapshots++ > 0 && conversationId) loadProcesses(conversationId);
  });
  stream.addEventListener('process.started', noteEvent);
  stream.addEventListener('process.ended', noteEvent);
}

function noteEvent(event) {
  let data;
  try {
    data = JSON.parse(event.data);
  } catch {
    return;
  }
  if (data && data.process) noteProcess(data.process, true);
}

export function wireProcesses() {
  $('processes-toggle').addEventListener('click', () => {
    collapsed = !collapsed;
    renderProcesses();
  });
}

export function renderProcesses() {
  const panel = $('processes');
  const shown = state.view === 'conversation' && !!conversationId && processes.length > 0;
  panel.hidden = !shown;
  if (!shown) {
    stopFollowing();
    schedulePoll(false);
    return;
  }
  const live = processes.filter(running).length;
  const ended = processes.length - live;
  $('processes-count').textContent = [live ? `${live} running` : null, ended ? `${ended} ended` : null].filter(Boolean).join(' · ');
  $('processes-toggle').setAttribute('aria-expanded', String(!collapsed));
  const list = $('process-list');
  list.hidden = collapsed;
  for (const [id, row] of rows) {
    if (!processes.some((p) => p.id === id)) {
      row.remove();
      rows.delete(id);
    }
  }
  processes.forEach((process, at) => {
    let row = rows.get(process.id);
    if (!row) {
      row = processRow(process);
      rows.set(process.id, row);
    }
    if (list.children[at] !== row) list.insertBefore(row, list.children[at] || null);
    updateRow(row, process);
  });
  if (openId && !processes.some((p) => p.id === openId)) openId = null;
  followOpenOutput();
  schedulePoll(live > 0);
}

// A row's parts, built once; updateRow fills them in.
function processRow(process) {
  const outputId = `process-output-${process.id}`;
  const name = el('span', { class: 'visually-hidden' }, ` of ${shortCommand(process.command)}`);
  return el(
    'li',
    { class: 'process', 'data-id': process.id },
    el(
      'div',
      { class: 'process-head' },
      el('span', { class: 'process-status' }),
      el('code', { class: 'process-command', title: `${visibleText(process.command)}\nstarted ${fullTime(Date.parse(process.started_at))}` }, markInvisible(process.command).nodes),
      el('span', { class: 'process-ports' }),
      el('span', { class: 'spacer' }),
      el(
        'button',
        {
          type: 'button',
          class: 'process-output-toggle',
          'aria-expanded': 'false',
          'aria-controls': outputId,
          onclick: () => toggleOutput(process.id),
        },
        'Output',
        name.cloneNode(true),
      ),
      el('button', { type: 'button', class: 'process-stop danger', onclick: () => stopProcess(process.id) }, el('span', { class: 'stop-label' }, 'Stop'), name),
    ),
    el('div', { class: 'process-reason' }),
    el('pre', { id: outputId, class: 'process-output', tabindex: '0', hidden: true }),
  );
}

function updateRow(row, process) {
  row.className = `process status-${process.status}`;
  const status = row.querySelector('.process-status');
  const reason = process.reason || '';
  status.replaceChildren(...(running(process) ? [el('span', { class: 'spinner', 'aria-hidden': 'true' })] : []), statusText(process));
  status.title = reason || (process.ended_at ? `ended ${fullTime(Date.parse(process.ended_at))}` : '');
  const reasonLine = row.querySelector('.process-reason');
  reasonLine.textContent = reason;
  reasonLine.hidden = !reason;
  const ports = running(process) ? process.ports || [] : [];
  row.querySelector('.process-ports').replaceChildren(...ports.map((port) => portLink(port)));
  const stop = row.querySelector('.process-stop');
  const isStopping = stopping.has(process.id);
  if (!running(process) && stop.contains(document.activeElement)) row.querySelector('.process-output-toggle').focus();
  stop.hidden = !running(process);
  // aria-disabled, not disabled: a disabled button would lose the focus.
  stop.setAttribute('aria-disabled', String(isStopping));
  stop.querySelector('.stop-label').textContent = isStopping ? 'Stopping…' : 'Stop';
  const open = openId === process.id;
  row.querySelector('.process-output-toggle').setAttribute('aria-expanded', String(open));
  const pre = row.querySelector('.process-output');
  pre.hidden = !open;
  if (open) showOutput(process.id);
}

// A port as a link to this page's host: whether it speaks HTTP is for the user to find out.
function portLink(port) {
  const url = `${location.protocol === 'https:' ? 'https' : 'http'}://${location.hostname}:${port}/`;
  return el('a', { class: 'process-port', href: url, target: '_blank', rel: 'noopener noreferrer', title: `Open ${url} (the process listens on TCP port ${port})` }, `${location.hostname}:${port}`);
}

function toggleOutput(id) {
  openId = openId === id ? null : id;
  renderProcesses();
}

async function stopProcess(id) {
  if (stopping.has(id)) return;
  stopping.add(id);
  renderProcesses();
  const conversation = conversationId;
  try {
    const process = await api('POST', `/api/conversations/${enc(conversation)}/processes/${enc(id)}/stop`);
    stopping.delete(id);
    if (conversation === conversationId) noteProcess(process, true);
  } catch (error) {
    stopping.delete(id);
    if (conversation === conversationId) {
      showError(error);
      renderProcesses();
    }
  }
}

// ------------------------------------------------------------------------------------------------
// The open output.

function outputOf(id) {
  if (!outputs.has(id)) {
    const process = processes.find((p) => p.id === id);
    const from = Math.max(0, ((process && process.output_bytes) || 0) - TAIL_BYTES);
    // `earlier`: output before the text kept (not read back, dropped, or cut from the tail).
    outputs.set(id, { text: '', next: from, earlier: from > 0, read: false });
  }
  return outputs.get(id);
}

function showOutput(id) {
  const row = rows.get(id);
  if (!row) return;
  const pre = row.querySelector('.process-output');
  const output = outputOf(id);
  const atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 8;
  const earlier = output.earlier ? '… (earlier output not shown)\n' : '';
  const text = !output.read ? 'Reading the output…' : output.text || output.earlier ? `${earlier}${output.text}` : '(no output yet)';
  if (pre.textContent !== text) pre.textContent = text;
  if (atEnd) pre.scrollTop = pre.scrollHeight;
}

// What arrived after the cursor: kept as a tail of at most TAIL_CHARS, cut at a line's start.
function addOutput(id, read) {
  const output = outputOf(id);
  output.read = true;
  if (read.dropped) output.earlier = true;
  output.text += read.output || '';
  output.next = read.next;
  if (output.text.length > TAIL_CHARS) {
    let cut = output.text.length - TAIL_CHARS;
    const line = output.text.indexOf('\n', cut);
    if (line >= 0 && line - cut < 200) cut = line + 1;
    output.text = output.text.slice(cut);
    output.earlier = true;
  }
  showOutput(id);
}

// Follows the open output while its process runs, or reads what is left once it ended; no
// output is followed while the panel is folded or out of sight (the Agents tab).
function followOpenOutput() {
  const inSight = !collapsed && state.tab !== 'agents';
  const process = inSight && openId ? processes.find((p) => p.id === openId) : null;
  if (!process) {
    stopFollowing();
    return;
  }
  if (follower && follower.id === process.id) return;
  stopFollowing();
  if (running(process)) openStream(process.id);
  else readRest(process.id);
}

function openStream(id) {
  const conversation = conversationId;
  const output = outputOf(id);
  const source = new EventSource(streamUrl(`/api/conversations/${enc(conversation)}/processes/${enc(id)}/output?since=${output.next}`));
  follower = { id, source };
  const current = () => follower && follower.source === source;
  source.addEventListener('open', () => {
    if (!current()) return;
    output.read = true;
    showOutput(id);
  });
  source.addEventListener('output', (event) => {
    if (!current()) return;
    addOutput(id, JSON.parse(event.data));
    refreshSoon();
  });
  source.addEventListener('ended', (event) => {
    if (!current()) return;
    source.close();
    follower = { id, source: null };
    outputOf(id).read = true;
    noteProcess(JSON.parse(event.data).process, true);
    showOutput(id);
  });
  source.addEventListener('error', () => {
    if (!current()) return;
    // EventSource would start again from the first cursor: start again from the last one.
    source.close();
    follower = null;
    clearTimeout(reconnectTimer);
    reconnectTimer = setTimeout(() => {
      if (conversation === conversationId) followOpenOutput();
    }, RECONNECT_MS);
  });
}

async function readRest(id) {
  const conversation = conversationId;
  follower = { id, source: null };
  const output = outputOf(id);
  try {
    const read = await api('GET', `/api/conversations/${enc(conversation)}/processes/${enc(id)}/output?since=${output.next}`);
    if (conversation !== conversationId) return;
    addOutput(id, read);
  } catch (error) {
    if (conversation === conversationId) showError(error);
  }
}

function stopFollowing() {
  clearTimeout(reconnectTimer);
  reconnectTimer = null;
  if (follower && follower.source) follower.source.close();
  follower = null;
}

// ------------------------------------------------------------------------------------------------
// Reading the list again while something runs: the ports it listens on have no event.

function schedulePoll(on) {
  if (!on) {
    clearInterval(pollTimer);
    pollTimer = null;
    return;
  }
  if (pollTimer) return;
  pollTimer = setInterval(() => {
    if (conversationId && !document.hidden) loadProcesses(conversationId, true);
  }, POLL_MS);
}

function refreshSoon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = null;
    if (conversationId) loadProcesses(conversationId, true);
  }, REFRESH_AFTER_OUTPUT_MS);
}
