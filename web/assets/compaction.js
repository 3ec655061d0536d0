// Compressing the context by hand ("Compress context"): the button says it works until the
// service answers, and the answer is told in words.

import { api, ApiError } from './api.js';
import { enc, formatTokens, plural } from './dom.js';
import { showError, showNotice } from './banners.js';
import { state } from './state.js';
import { shownItems } from './timeline.js';

// What was done: how many items the summary stands for, and the context before and after; or
// that nothing is older than the latest turn. `render` draws the button again.
export async function compact(render) {
  const conv = state.conv;
  if (!conv || state.compacting) return;
  const usedBefore = state.usage ? state.usage.used_tokens : null;
  // The items not yet summarized, when the timeline shows the root agent (the one compressed).
  const open = state.sessionId === conv.root_session_id ? shownItems().filter((item) => !item.compacted && item.kind !== 'summary') : null;
  state.compacting = true;
  render();
  const notice = (text) => showNotice([text], { key: 'compaction', conversationId: conv.id });
  try {
    const answer = await api('POST', `/api/conversations/${enc(conv.id)}/compact`, {});
    if (!state.conv || state.conv.id !== conv.id) return;
    const covers = answer.summary.covers_through_seq;
    const count = open ? open.filter((item) => item.seq <= covers).length : null;
    const usedAfter = answer.usage ? answer.usage.used_tokens : null;
    const what = count === null ? 'the older history summarized' : `${plural(count, 'earlier item')} summarized`;
    const tokens = usedBefore !== null && usedAfter !== null ? `, ${formatTokens(usedBefore)} → ${formatTokens(usedAfter)} tokens` : '';
    notice(`Context compressed: ${what}${tokens}.`);
  } catch (error) {
    if (error instanceof ApiError && error.code === 'nothing_to_compact') {
      notice('Nothing older to compress: the model already reads only the latest turn, after any earlier summary.');
    } else {
      showError(error);
    }
  } finally {
    if (state.conv && state.conv.id === conv.id) {
      state.compacting = false;
      render();
    }
  }
}
