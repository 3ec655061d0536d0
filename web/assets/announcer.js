// What a screen reader hears without looking: finished messages, once, through one polite live
// region. Streamed text is never live (it would be read out chunk by chunk); status lines carry
// role="status" themselves.

import { $ } from './dom.js';

// Long replies are cut: the reader can go to the message itself.
const MAX_ANNOUNCED_CHARS = 600;

export function announce(text) {
  const region = $('announcer');
  const plain = text.replace(/\s+/g, ' ').trim();
  const trimmed = plain.length > MAX_ANNOUNCED_CHARS ? `${plain.slice(0, MAX_ANNOUNCED_CHARS)}…` : plain;
  // A region whose text does not change is not read again: clear it first.
  region.textContent = '';
  requestAnimationFrame(() => {
    region.textContent = trimmed;
  });
}
