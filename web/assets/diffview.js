// Line diffs as tool cards show them: rows of added, removed and unchanged lines (long runs of
// unchanged lines folded), and the block that shows them; and the service's unified diffs (a
// turn's changes). A last line without a newline after it carries a small "no newline at end of
// file" mark, where a unified diff has its raw `\ No newline at end of file` line.

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

// The rows from `before` to `after`, with the count of added and removed lines. A row is
// [kind, line] or, when `before` and `after` are whole files (`wholeFiles`), for a changed last
// line with no newline after it, [kind, line, true]. (A replaced piece of a file, as an edit
// gives, ends where the piece ends, not where the file does.)
export function lineDiffRows(before, after, { wholeFiles = false } = {}) {
  const rows = [];
  let added = 0;
  let removed = 0;
  // How many lines of each side the rows have gone through: the last line of a side that ends
  // without a newline is marked where it is added or removed (an unchanged one is the same on
  // both sides, newline or not).
  const beforeLines = splitLines(before || '').length;
  const afterLines = splitLines(after || '').length;
  const beforeNoEol = wholeFiles && !!before && !before.endsWith('\n');
  const afterNoEol = wholeFiles && !!after && !after.endsWith('\n');
  let beforeSeen = 0;
  let afterSeen = 0;
  const parts = diffLines(before, after);
  parts.forEach((part, index) => {
    const lines = splitLines(part.value);
    if (part.added) {
      added += lines.length;
      afterSeen += lines.length;
      lines.forEach((line, at) => rows.push(afterNoEol && afterSeen === afterLines && at === lines.length - 1 ? ['add', line, true] : ['add', line]));
    } else if (part.removed) {
      removed += lines.length;
      beforeSeen += lines.length;
      lines.forEach((line, at) => rows.push(beforeNoEol && beforeSeen === beforeLines && at === lines.length - 1 ? ['del', line, true] : ['del', line]));
    } else {
      beforeSeen += lines.length;
      afterSeen += lines.length;
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

// The mark after a last line that has no newline after it.
export function noNewlineMark() {
  return el('span', { class: 'no-eol', title: 'The file ends here, without a newline after this line' }, 'no newline at end of file');
}

// The block showing `rows`, labelled for screen readers.
export function diffBlock(rows, label) {
  const pre = el(
    'pre',
    { class: 'output diff from-head', 'aria-label': label },
    rows.map(([kind, line, noEol]) =>
      el(
        'span',
        { class: `diff-line diff-${kind}` },
        el('span', { class: 'diff-sign', 'aria-hidden': 'true' }, { add: '+', del: '−', same: ' ', fold: ' ' }[kind]),
        line,
        noEol ? [' ', noNewlineMark()] : null,
        '\n',
      ),
    ),
  );
  pre.hidden = rows.length === 0;
  return pre;
}

// Whether a line of a unified diff is its "\ No newline at end of file": it belongs to the line
// before it.
export function isNoNewlineLine(line) {
  return line.startsWith('\\ ');
}

// A unified diff (the service's) with its added and removed lines marked, and the mark for a
// last line without a newline in place of the diff's `\ No newline at end of file` line.
export function unifiedDiffBlock(diff) {
  const lines = diff.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const spans = [];
  for (const line of lines) {
    const last = spans[spans.length - 1];
    if (isNoNewlineLine(line) && last) {
      last.lastChild.before(' ', noNewlineMark());
      continue;
    }
    const kind = line.startsWith('+++') || line.startsWith('---') ? 'head' : line[0] === '+' ? 'add' : line[0] === '-' ? 'del' : line.startsWith('@@') ? 'hunk' : '';
    spans.push(el('span', { class: kind ? `diff-${kind}` : null }, line, '\n'));
  }
  return el('pre', { class: 'file-diff' }, spans);
}
