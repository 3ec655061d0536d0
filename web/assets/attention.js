// Cues for a page nobody is looking at. When a turn of the open conversation ends (or fails, or
// is interrupted) or an approval waits for an answer while the page is hidden (another tab, a
// minimised window), the tab's title gets a mark until the page is seen again. Desktop
// notifications say the same when the user turned them on (a setting kept in this browser); the
// browser's permission is asked for only then.

import { $ } from './dom.js';
import { showNotice } from './banners.js';
import { isQuestion, serverName } from './mcpasks.js';

const MARK = '● ';
const SETTING = 'openvaala.notifications';

let baseTitle = document.title;
let marked = false;
// Approvals already cued: a snapshot after a reconnect shows them again.
const cuedApprovals = new Set();

function writeTitle() {
  const title = marked ? `${MARK}${baseTitle}` : baseTitle;
  if (document.title !== title) document.title = title;
}

// The page's title, without the mark: the header sets it for the view shown.
export function setTitle(title) {
  baseTitle = title;
  writeTitle();
}

function notificationsOn() {
  return 'Notification' in window && Notification.permission === 'granted' && localStorage.getItem(SETTING) === 'on';
}

// What happened, for the notification's text.
function sentence(what) {
  if (what.approval && isQuestion(what.approval)) return `Waiting for your answer: the MCP server ${serverName(what.approval)} asks a question.`;
  if (what.approval) return `Waiting for your answer: ${what.approval.tool || 'a tool call'} needs approval.`;
  if (what.status === 'failed') return `The turn failed${what.error ? `: ${what.error}` : '.'}`;
  if (what.status === 'interrupted') return 'The turn was interrupted.';
  return 'The turn is done.';
}

// Something in the open conversation wants the reader: `what` is { status, error } of a turn
// that ended, or { approval } (live, or in a snapshot: a conversation opened just before the
// reader left). Nothing happens while the page is shown.
export function cue(conversation, what) {
  if (!document.hidden) return;
  if (what.approval) {
    if (cuedApprovals.has(what.approval.id)) return;
    cuedApprovals.add(what.approval.id);
  }
  marked = true;
  writeTitle();
  if (!notificationsOn()) return;
  const notification = new Notification(conversation.title || 'OpenVaala', {
    body: sentence(what),
    tag: `openvaala-${conversation.id}`,
  });
  notification.onclick = () => {
    window.focus();
    notification.close();
  };
}

async function toggleNotifications(box) {
  if (!box.checked) {
    localStorage.removeItem(SETTING);
    return;
  }
  let permission = 'Notification' in window ? Notification.permission : 'unsupported';
  if (permission === 'default') permission = await Notification.requestPermission();
  if (permission !== 'granted') {
    box.checked = false;
    showNotice(
      [
        permission === 'unsupported'
          ? 'This browser cannot show desktop notifications.'
          : 'The browser does not allow this page to show notifications: allow them in its settings for this site, then turn them on again.',
      ],
      { key: 'notifications' },
    );
    return;
  }
  localStorage.setItem(SETTING, 'on');
}

export function watchAttention() {
  document.addEventListener('visibilitychange', () => {
    if (document.hidden || !marked) return;
    marked = false;
    writeTitle();
  });
  const box = $('notify');
  box.checked = notificationsOn();
  box.addEventListener('change', () => toggleNotifications(box));
}
