// Per-turn token counts. The service counts the context, not turns, so a turn's figure is how
// much the context meter grew while it ran: the meter's figure after the turn ended (the figures
// that arrive until the next turn starts count its last output) minus its figure when the turn
// started, or when this page first saw it running. Only turns of the root session this tab watched have one, and a compaction during
// the turn leaves it without; the figures are kept for the tab's session (sessionStorage), so a
// reload still shows them.

import { $, el, formatCount, formatTokens } from './dom.js';
import { state } from './state.js';

// The root session's turn being measured: running, or the last one finished.
let measuring = null; // { conversationId, turnId, from, ended }

function storageKey(conversationId) {
  return `openvaala.turn-tokens.${conversationId}`;
}

function stored(conversationId) {
  try {
    return JSON.parse(sessionStorage.getItem(storageKey(conversationId))) || {};
  } catch {
    return {};
  }
}

function inRootSession() {
  return state.conv && state.sessionId === state.conv.root_session_id;
}

export function noteTurnStarted(turnId) {
  measuring = state.usage ? { conversationId: state.conv.id, turnId, from: state.usage.used_tokens, ended: false } : null;
}

// A snapshot shows the turn running: one that started before this page followed the stream
// (the first turn of a conversation just created, a reload) is measured from now.
export function noteTurnRunning(turnId) {
  if (!measuring || measuring.turnId !== turnId || measuring.conversationId !== state.conv.id) noteTurnStarted(turnId);
}

export function noteTurnEnded(turnId) {
  if (!measuring || measuring.turnId !== turnId) return;
  measuring.ended = true;
  measure();
}

// New figures from the service: after a turn's end they still count its last output.
export function noteUsage() {
  if (measuring && measuring.ended) measure();
}

// The context is compressed: how much it grew no longer says what a turn added.
export function stopMeasuring() {
  measuring = null;
}

function measure() {
  if (!state.conv || measuring.conversationId !== state.conv.id || !state.usage) return;
  const tokens = state.usage.used_tokens - measuring.from;
  // Reported and estimated figures can disagree by a few tokens: a turn that seems to shrink
  // the context has no figure.
  if (tokens <= 0) return;
  const all = stored(measuring.conversationId);
  all[measuring.turnId] = tokens;
  sessionStorage.setItem(storageKey(measuring.conversationId), JSON.stringify(all));
  showTurnTokens();
}

// Puts each measured turn's figure after the turn's last block (its items, files, end, and the
// approval cards that follow its calls). Called again after the timeline is drawn anew.
export function showTurnTokens() {
  if (!inRootSession()) return;
  for (const [turnId, tokens] of Object.entries(stored(state.conv.id))) show(turnId, tokens);
}

function show(turnId, tokens) {
  const items = $('items');
  const selector = `:scope > [data-turn="${CSS.escape(turnId)}"]`;
  let last = [...items.querySelectorAll(selector)].filter((node) => !node.classList.contains('turn-tokens')).pop();
  if (!last) return;
  while (last.nextElementSibling && last.nextElementSibling.classList.contains('approval')) last = last.nextElementSibling;
  let line = items.querySelector(`${selector}.turn-tokens`);
  if (!line) line = el('div', { class: 'turn-tokens', 'data-turn': turnId });
  line.textContent = `${formatTokens(tokens)} tokens`;
  line.title =
    `The context grew by about ${formatCount(tokens)} tokens during this turn: the context meter's figure after it ended minus its figure when it started (or when this page first saw it running). ` +
    'The service counts the context, not turns, so only turns this tab watched have a figure.';
  if (last.nextElementSibling !== line) last.after(line);
}
