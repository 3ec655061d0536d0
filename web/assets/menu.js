// A small popup menu (ARIA menu button pattern): opened from a button or a key, its items are
// reached with the arrow keys, Escape or a click elsewhere closes it and gives the focus back.
// Used for a conversation's actions in the sidebar and for the header's actions on a phone.

import { el } from './dom.js';

let open = null; // { menu, opener, onClose }

export function isMenuOpen() {
  return open !== null;
}

let hints = 0; // for the ids of the items' hints

// `items`: [{label, run, danger?, disabled?, hint?}] (`hint`: a short line under the label
// saying what the item does: its description, not part of its name); `opener`: the element the
// menu belongs to (its position, and where the focus returns); `onClose`: called once it is
// closed.
export function openMenu(opener, items, label, onClose) {
  closeMenu(false);
  const buttons = items.map((item) => {
    const hintId = item.hint ? `menu-hint-${++hints}` : null;
    return el(
      'button',
      {
        type: 'button',
        role: 'menuitem',
        tabindex: '-1',
        class: item.danger ? 'danger-text' : null,
        disabled: item.disabled,
        'aria-describedby': hintId,
        onclick: () => {
          closeMenu(true);
          item.run();
        },
      },
      item.hint ? [el('span', { class: 'menu-label' }, item.label), el('span', { class: 'menu-hint', id: hintId, 'aria-hidden': 'true' }, item.hint)] : item.label,
    );
  });
  const menu = el('div', { class: 'menu', role: 'menu', 'aria-label': label }, buttons);
  // Inside the opener's landmark (the sidebar or the main area), so that all the page's content
  // is in one; it is fixed in place, so where it sits in the tree does not move it.
  (opener.closest('main, aside') || document.body).append(menu);
  place(menu, opener);
  opener.setAttribute('aria-expanded', 'true');
  const enabled = () => buttons.filter((b) => !b.disabled);
  menu.addEventListener('keydown', (event) => {
    const list = enabled();
    const index = list.indexOf(document.activeElement);
    const move = (to) => {
      event.preventDefault();
      list[(to + list.length) % list.length].focus();
    };
    if (event.key === 'ArrowDown') move(index + 1);
    else if (event.key === 'ArrowUp') move(index - 1);
    else if (event.key === 'Home') move(0);
    else if (event.key === 'End') move(list.length - 1);
    else if (event.key === 'Escape') {
      event.preventDefault();
      event.stopPropagation();
      closeMenu(true);
    } else if (event.key === 'Tab') {
      closeMenu(false);
    }
  });
  open = { menu, opener, onClose };
  const first = enabled()[0];
  if (first) first.focus();
}

export function closeMenu(refocus) {
  if (!open) return;
  const { menu, opener, onClose } = open;
  open = null;
  menu.remove();
  opener.setAttribute('aria-expanded', 'false');
  if (refocus && opener.isConnected) opener.focus();
  if (onClose) onClose();
}

// Below the opener, kept inside the window.
function place(menu, opener) {
  const box = opener.getBoundingClientRect();
  const width = menu.offsetWidth;
  const height = menu.offsetHeight;
  const left = Math.max(4, Math.min(box.right - width, window.innerWidth - width - 4));
  let top = box.bottom + 4;
  if (top + height > window.innerHeight - 4) top = Math.max(4, box.top - height - 4);
  menu.style.left = `${left}px`;
  menu.style.top = `${top}px`;
}

document.addEventListener('pointerdown', (event) => {
  if (open && !open.menu.contains(event.target) && !open.opener.contains(event.target)) closeMenu(false);
});
window.addEventListener('resize', () => closeMenu(false));
