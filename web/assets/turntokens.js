// Per-turn token counts, as the service reports them: what a turn's model calls read and wrote.
// The turns already ended come with the history (`GET …/turns`), the next ones with their
// `turn.ended`, so every turn of the session shown has its figure, whoever watched it.

import { api } from './api.js';
import { $, el, enc, formatCount, formatTokens, plural } from './dom.js';

// The session shown: its turns' figures by turn id.
let shown = { key: null, figures: new Map() };

function keyOf(conversationId, sessionId) {
  return `${conversationId} ${sessionId}`;
}

// Every turn of a session with its figures, page by page. The caller installs them with
// `useTurnTokens` once it knows the page still shows that session.
export async function loadTurnTokens(conversationId, sessionId) {
  const figures = new Map();
  let after = null;
  for (;;) {
    const params = new URLSearchParams({ session: sessionId, limit: '2000' });
    if (after !== null) params.set('after', after);
    const page = await api('GET', `/api/conversations/${enc(conversationId)}/turns?${params}`);
    for (const turn of page.turns) if (turn.usage && turn.status !== 'running') figures.set(turn.id, turn.usage);
    if (!page.next_after) return { key: keyOf(conversationId, sessionId), figures };
    after = page.next_after;
  }
}

export function useTurnTokens(loaded) {
  shown = loaded;
}

// A turn of the session shown ended, with its figures.
export function noteTurnEnded(conversationId, sessionId, turnId, usage) {
  if (!usage || shown.key !== keyOf(conversationId, sessionId)) return;
  shown.figures.set(turnId, usage);
  show(turnId, usage);
}

// Puts each turn's figure after the turn's last block (its items, files, end, and the approval
// cards that follow its calls). Called again after the timeline is drawn anew.
export function showTurnTokens() {
  for (const [turnId, usage] of shown.figures) show(turnId, usage);
}

function show(turnId, usage) {
  // A turn whose model never answered (stopped first), or whose provider counts nothing.
  if (usage.model_calls === usage.unreported_calls) return;
  const items = $('items');
  const selector = `:scope > [data-turn="${CSS.escape(turnId)}"]`;
  let last = [...items.querySelectorAll(selector)].filter((node) => !node.classList.contains('turn-tokens')).pop();
  if (!last) return;
  while (last.nextElementSibling && last.nextElementSibling.classList.contains('approval')) last = last.nextElementSibling;
  let line = items.querySelector(`${selector}.turn-tokens`);
  if (!line) line = el('div', { class: 'turn-tokens', 'data-turn': turnId });
  const cached = usage.cached_input_tokens ? ` (${formatTokens(usage.cached_input_tokens)} cached)` : '';
  const cost = typeof usage.cost === 'number' ? ` · cost ${formatCost(usage.cost)}` : '';
  const models = (usage.models || []).length > 1 ? ` · ${usage.models.map((entry) => entry.model).join(' then ')}` : '';
  line.textContent = `${formatTokens(usage.input_tokens)} in${cached} · ${formatTokens(usage.output_tokens)} out${cost}${models}`;
  line.title = describe(usage);
  if (last.nextElementSibling !== line) last.after(line);
}

// A cost in the currency units of the models' prices: cents where they matter, more digits
// for the fractions of a cent one call costs.
function formatCost(cost) {
  if (cost >= 1) return cost.toFixed(2);
  if (cost >= 0.01) return cost.toFixed(3);
  return cost.toFixed(4);
}

function describe(usage) {
  const reasoning = usage.reasoning_tokens ? ` (${formatCount(usage.reasoning_tokens)} of them reasoning)` : '';
  let text =
    `This turn's ${plural(usage.model_calls, 'model call')} read ${formatCount(usage.input_tokens)} tokens ` +
    `and wrote ${formatCount(usage.output_tokens)}${reasoning}. Each call reads the whole conversation again`;
  text += usage.cached_input_tokens
    ? `; ${formatCount(usage.cached_input_tokens)} of the tokens read came from the provider's prompt cache, which costs less.`
    : '.';
  if (usage.cache_write_tokens) text += ` ${formatCount(usage.cache_write_tokens)} were written to the cache.`;
  if ((usage.models || []).length > 1) {
    const calls = usage.models.map((entry) => `${entry.model} ${plural(entry.model_calls, 'call')}`);
    text += ` A fallback model answered part of it: ${calls.join(', ')}.`;
  }
  if (usage.unreported_calls) {
    text += ` ${plural(usage.unreported_calls, 'call')} reported no figures and ${usage.unreported_calls === 1 ? 'is' : 'are'} not counted.`;
  }
  return text;
}
