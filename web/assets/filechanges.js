// What the agent's tool calls changed in the working directory: "N files changed" after each
// turn that changed files (it opens the turn's diff), and the files part of "Restart from here":
// what a restore would put back and which paths are conflicts (changed since by someone else),
// asked before anything happens, and "Undo restore" afterwards.

import { api } from './api.js';
import { unifiedDiffBlock } from './diffview.js';
import { el, enc, plural } from './dom.js';
import { showError, showNotice } from './banners.js';
import { state } from './state.js';

// The distinct paths the tool calls among `items` changed.
export function changedPaths(items) {
  const paths = new Set();
  for (const item of items) {
    const files = item.kind === 'tool_call' && item.files;
    if (!files) continue;
    for (const kind of ['added', 'modified', 'deleted']) for (const path of files[kind] || []) paths.add(path);
  }
  return paths;
}

// The block after a turn that changed files, or null.
export function turnFilesBlock(turnId, items) {
  const count = changedPaths(items).size;
  if (!count) return null;
  return el(
    'div',
    { class: 'turn-files', 'data-turn': turnId },
    el('button', {
      type: 'button',
      class: 'link-button',
      text: `${plural(count, 'file')} changed`,
      title: 'Show what this turn changed in the working directory',
      onclick: () => showTurnDiff(turnId),
    }),
  );
}

function modal(title, ...content) {
  const dialog = el(
    'dialog',
    { class: 'files-dialog', 'aria-label': title },
    el('h2', {}, title),
    ...content,
  );
  dialog.addEventListener('close', () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  return dialog;
}

export async function showTurnDiff(turnId) {
  if (!state.conv) return;
  let changes;
  try {
    changes = await api('GET', `/api/conversations/${enc(state.conv.id)}/turns/${enc(turnId)}/changes`);
  } catch (error) {
    showError(error);
    return;
  }
  const files = changes.files.map((file) =>
    el(
      'details',
      { class: 'changed-file', open: true },
      el('summary', {}, el('span', { class: `change change-${file.change}` }, file.change), ' ', el('code', {}, file.path)),
      file.diff !== null
        ? unifiedDiffBlock(file.diff)
        : el('p', { class: 'muted' }, file.binary ? 'A binary file: no diff is shown.' : 'Its diff is left out: the whole answer reached its size limit.'),
    ),
  );
  const close = el('button', { type: 'button', text: 'Close', onclick: () => dialog.close() });
  const dialog = modal(
    `${plural(files.length, 'file')} changed in this turn`,
    files.length ? files : el('p', {}, 'The files this turn touched ended as they began.'),
    el('div', { class: 'dialog-actions' }, close),
  );
  close.focus();
}

// The paths a restore puts back, as a list (the first `max`, then how many more).
function pathList(paths, max = 15) {
  const shown = paths.slice(0, max);
  return el(
    'ul',
    { class: 'restore-files' },
    shown.map((path) => el('li', {}, el('code', {}, path))),
    paths.length > max ? el('li', { class: 'muted' }, `and ${plural(paths.length - max, 'more file')}`) : null,
  );
}

// The paths in a sentence: the first few, then how many more.
function pathNames(paths, max = 5) {
  const shown = paths.slice(0, max).join(', ');
  return paths.length > max ? `${shown} and ${plural(paths.length - max, 'more')}` : shown;
}

// Asks how to restart from `item` when the conversation changed files since: answers
// { restore, force }, or null when cancelled. What a restore would do (and its conflicts) is
// asked of the service first (a dry run: nothing changes).
export async function askRestore(item, changed) {
  let preview = null;
  let unavailable = null;
  try {
    const answer = await api('POST', `/api/conversations/${enc(state.conv.id)}/rewind`, {
      message_id: item.id,
      restore_files: true,
      dry_run: true,
    });
    preview = answer.restore;
  } catch (error) {
    unavailable = error.message;
  }
  return new Promise((resolve) => {
    let answer = null;
    const restore = el('input', { type: 'checkbox', checked: !!preview && preview.restored.length > 0, disabled: !preview });
    // Which files a restore would put back, by name (the dry run's answer).
    const restoring = preview && preview.restored.length
      ? el(
        'div',
        { class: 'restore-list', id: 'restore-list' },
        el('p', {}, `${preview.restored.length === 1 ? 'This file goes' : 'These files go'} back to how ${preview.restored.length === 1 ? 'it was' : 'they were'} just before this message:`),
        pathList(preview.restored),
      )
      : preview
        ? el('p', { class: 'muted', id: 'restore-list' }, 'No file would be restored: each was changed since by someone else (below), or is as it was.')
        : null;
    if (restoring) restore.setAttribute('aria-describedby', 'restore-list');
    const force = el('input', { type: 'checkbox' });
    const conflicts = preview && preview.conflicts.length
      ? el(
        'div',
        { class: 'restore-conflicts' },
        el('p', {}, `${plural(preview.conflicts.length, 'file was', 'files were')} changed since by someone else (you, or another conversation) and will be kept:`),
        el('ul', {}, preview.conflicts.map((path) => el('li', {}, el('code', {}, path)))),
        el('label', {}, force, ' Overwrite them too'),
      )
      : null;
    const confirm = el('button', {
      type: 'button',
      class: 'primary',
      text: 'Restart from here',
      onclick: () => {
        answer = { restore: restore.checked, force: force.checked };
        dialog.close();
      },
    });
    const dialog = modal(
      'Restart from here',
      el('label', { class: 'restore-choice' }, restore, ` Also restore files (${plural(changed, 'file')} changed since)`),
      restoring,
      unavailable ? el('p', { class: 'muted' }, `Files cannot be restored: ${unavailable}`) : null,
      conflicts,
      el('div', { class: 'dialog-actions' }, el('button', { type: 'button', text: 'Cancel', onclick: () => dialog.close() }), confirm),
    );
    dialog.addEventListener('close', () => resolve(answer));
    confirm.focus();
  });
}

// After a restore: what was done, with "Undo restore" (`shownIn`: the conversation that opens).
export function noticeRestored(conversationId, restore, shownIn) {
  const kept = restore.conflicts.length ? `; kept ${plural(restore.conflicts.length, 'file')} changed since by someone else` : '';
  const names = restore.restored.length ? `: ${pathNames(restore.restored)}` : '';
  showNotice([`Restored ${plural(restore.restored.length, 'file')}${names}${kept}.`], {
    key: 'restore',
    conversationId: shownIn,
    action: {
      label: 'Undo restore',
      run: async () => {
        try {
          const answer = await api('POST', `/api/conversations/${enc(conversationId)}/restores/${enc(restore.id)}/undo`, {});
          const left = answer.restore.conflicts.length ? ` (${plural(answer.restore.conflicts.length, 'file')} changed since were kept: ${pathNames(answer.restore.conflicts)})` : '';
          const back = answer.restore.restored.length ? `: ${pathNames(answer.restore.restored)}` : '';
          showNotice([`The files are back as they were before the restore${back}${left}.`], { key: 'restore', conversationId: shownIn });
        } catch (error) {
          showError(error);
        }
      },
    },
  });
}
