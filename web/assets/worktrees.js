// A fork made into a copy of the working tree ("Fork into a worktree") works in a directory of
// its own: the list's row and the header mark it, with that directory (shortened where space is
// tight, whole in its title and for a screen reader).

import { el, shortPath } from './dom.js';

// "git" (a linked git worktree) or "copy" (a plain copy), or null for any other conversation.
export function worktreeKind(conversation) {
  const from = conversation && conversation.forked_from;
  return from && from.worktree ? from.worktree : null;
}

function explanation(kind, cwd) {
  const what = kind === 'git' ? 'a linked git worktree' : 'a plain copy of the files';
  return `Forked into a copy of the working tree (${what}): it changes its own files, in ${cwd}`;
}

// The mark and the directory; `max`: how many characters the directory may take (the whole
// path when it fits). `brief`: the mark and the shortened directory only, no words for a screen
// reader beyond them (the list's row, whose link says it all in one line).
export function worktreeMark(conversation, max, brief) {
  const kind = worktreeKind(conversation);
  if (!kind) return null;
  const cwd = conversation.cwd || '';
  const short = shortPath(cwd, max);
  const title = explanation(kind, cwd);
  const dir = brief
    ? el('code', { class: 'worktree-dir' }, short)
    : el(
        'code',
        { class: 'worktree-dir' },
        short === cwd ? cwd : [el('span', { 'aria-hidden': 'true' }, short), el('span', { class: 'visually-hidden' }, cwd)],
      );
  return el(
    'span',
    { class: `worktree-mark worktree-${kind}`, title, 'data-kind': kind },
    el('span', { class: 'badge worktree' }, brief ? null : el('span', { class: 'visually-hidden' }, 'forked into a '), 'worktree'),
    brief ? ' ' : el('span', { class: 'visually-hidden' }, ', in '),
    dir,
  );
}
