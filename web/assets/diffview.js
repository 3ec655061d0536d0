// Line diffs as tool cards show them: rows of added, removed and unchanged lines (long runs of
// unchanged lines folded), and the block that shows them.

import { diffLines } from '/vendor/diff/diff/line.js';
import { el, plural } from './dom.js';

// Unchanged lines kept around each change of a diff.
const DIFF_CONTEXT = 3;

export function splitLines(text) {
  if (!text) return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

// The rows from `before` to `after`, with the count of added and removed lines.
export function lineDiffRows(before, after) {
  const rows = [];
  let added = 0;
  let removed = 0;
  const parts = diffLines(before, after);
  parts.forEach((part, index) => {
    const lines = splitLines(part.value);
    if (part.added) {
      added += lines.length;
      for (const line of lines) rows.push(['add', line]);
    } else if (part.removed) {
      removed += lines.length;
      for (const line of lines) rows.push(['del', line]);
    } else {
      // Unchanged: a few lines of context next to each change, the rest folded.
      const head = index === 0 ? 0 : DIFF_CONTEXT;
      const tail = index === parts.length - 1 ? 0 : DIFF_CONTEXT;
      if (lines.length <= head + tail + 1) {
        for (const line of lines) rows.push(['same', line]);
      } else {
        for (const line of lines.slice(0, head)) rows.push(['same', line]);
        rows.push(['fold', `⋯ ${plural(lines.length - head - tail, 'unchanged line')}`]);
        for (const line of lines.slice(lines.length - tail)) rows.push(['same', line]);
      }
    }
  });
  return { rows, added, removed };
}

// The block showing `rows`, labelled for screen readers.
export function diffBlock(rows, label) {
  const pre = el(
    'pre',
    { class: 'output diff from-head', 'aria-label': label },
    rows.map(([kind, line]) =>
      el('span', { class: `diff-line diff-${kind}` }, el('span', { class: 'diff-sign', 'aria-hidden': 'true' }, { add: '+', del: '−', same: ' ', fold: ' ' }[kind]), `${line}\n`),
    ),
  );
  pre.hidden = rows.length === 0;
  return pre;
}
