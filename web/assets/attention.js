// Cues for a page nobody is looking at. When a turn of the open conversation ends (or fails, or
// is interrupted) or an approval waits for an answer while the page is hidden (another tab, a
// minimised window), the tab's title gets a mark until the page is seen again. A notification
// says the same when the user turned "Notify me on this device" on (push.js): the service
// pushes only to a device that has no event stream open, so while the page is open it is the
// page that notifies, pushes or not. It is shown through the service
// worker where one is active and the browser allows it (a page's own `new Notification()`
// throws on Android), else by the page; clicked, it opens the conversation.

import { isQuestion, serverName } from './mcpasks.js';
import { notificationMode, wireNotifySwitch } from './push.js';
import { activeRegistration } from './serviceworker.js';
import { navigate } from './state.js';

const MARK = '● ';
const ICON = '/assets/icons/icon-192.png';

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

// The browser's own answer about notifications ('granted', 'denied', 'prompt'), which the
// service worker's notifications follow, kept current.
let allowed = 'prompt';
if (navigator.permissions && navigator.permissions.query) {
  navigator.permissions.query({ name: 'notifications' }).then(
    (status) => {
      allowed = status.state;
      status.addEventListener('change', () => {
        allowed = status.state;
      });
    },
    () => {},
  );
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
  if (notificationMode() === 'off') return;
  const url = new URL(`/#/c/${encodeURIComponent(conversation.id)}`, location.origin).href;
  notify(conversation.title || 'OpenVaala', { body: sentence(what), tag: `openvaala-${conversation.id}`, data: { url }, icon: ICON });
}

function notify(title, options) {
  const registration = activeRegistration();
  if (registration && allowed === 'granted') {
    registration.showNotification(title, options).catch(() => notifyHere(title, options));
  } else {
    notifyHere(title, options);
  }
}

function notifyHere(title, options) {
  let notification;
  try {
    notification = new Notification(title, options);
  } catch {
    // This browser shows notifications only through a service worker, and none is active.
    return;
  }
  notification.onclick = () => {
    window.focus();
    notification.close();
    const hash = new URL(options.data.url).hash;
    if (location.hash !== hash) navigate(hash);
  };
}

export function watchAttention() {
  document.addEventListener('visibilitychange', () => {
    if (document.hidden || !marked) return;
    marked = false;
    writeTitle();
  });
  wireNotifySwitch();
}
