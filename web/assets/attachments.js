// Images attached to the message being written: picked with the composer's button, pasted into
// the message box or dropped on the composer, shown as thumbnails with a remove button until the message is sent (they go with
// it as `images`). Like the text, they stay with the conversation they were attached in.

import { $, el } from './dom.js';
import { showError } from './banners.js';

// What the service takes (docs/api.md): these types, at most 20 images, 20 MB a message.
const TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
const MAX_IMAGES = 20;
const MAX_BYTES = 20 * 1024 * 1024;

let attached = []; // { media_type, data (base64), name, bytes }
const kept = new Map(); // draft key → the images attached there

function render() {
  const box = $('attachments');
  box.hidden = attached.length === 0;
  box.replaceChildren(
    ...attached.map((image, index) => {
      const label = `Attached image ${index + 1}${image.name ? ` (${image.name})` : ''}`;
      return el(
        'figure',
        { class: 'attachment' },
        el('img', { src: `data:${image.media_type};base64,${image.data}`, alt: label }),
        el('button', {
          type: 'button',
          class: 'attachment-remove',
          text: '×',
          title: 'Remove this image',
          'aria-label': `Remove ${label.charAt(0).toLowerCase()}${label.slice(1)}`,
          onclick: () => {
            attached.splice(index, 1);
            render();
            $('message').focus();
          },
        }),
      );
    }),
  );
}

function readBase64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ''));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function attach(files) {
  for (const file of files) {
    if (!TYPES.has(file.type)) {
      showError(null, { text: `${file.name || 'That file'} cannot be attached: only PNG, JPEG, GIF and WebP images can.` });
      continue;
    }
    if (attached.length >= MAX_IMAGES) {
      showError(null, { text: `A message takes at most ${MAX_IMAGES} images.` });
      break;
    }
    const bytes = attached.reduce((sum, image) => sum + image.bytes, 0);
    if (bytes + file.size > MAX_BYTES) {
      showError(null, { text: `${file.name || 'That image'} cannot be attached: a message takes at most 20 MB of images.` });
      continue;
    }
    attached.push({ media_type: file.type, data: await readBase64(file), name: file.name, bytes: file.size });
    render();
  }
}

// The images of the message being sent, and the box emptied of them.
export function takeImages() {
  const images = attached.map(({ media_type, data }) => ({ media_type, data }));
  const taken = attached;
  attached = [];
  render();
  return { images, taken };
}

// A send that failed: its images come back, before any attached since.
export function putBackImages(taken) {
  attached = [...taken, ...attached];
  render();
}

export function hasImages() {
  return attached.length > 0;
}

// Switching conversations: the images stay with the one they were attached in.
export function keepImages(key) {
  if (attached.length) kept.set(key, attached);
  else kept.delete(key);
}

export function restoreImages(key) {
  attached = kept.get(key) || [];
  render();
}

// A later send elsewhere (a failed one whose box is not shown) keeps its images there.
export function keepImagesFor(key, taken) {
  if (taken.length) kept.set(key, [...taken, ...(kept.get(key) || [])]);
}

const imageFiles = (list) => [...(list || [])].filter((file) => file.type.startsWith('image/'));

export function wireAttachments() {
  // The button opens the system's file picker; the same file can be picked again.
  const picker = $('attach-input');
  $('attach').addEventListener('click', () => picker.click());
  picker.addEventListener('change', async () => {
    const files = [...picker.files];
    picker.value = '';
    await attach(files);
    $('message').focus();
  });
  $('message').addEventListener('paste', (event) => {
    const data = event.clipboardData;
    const files = data ? imageFiles(data.files) : [];
    if (!files.length) return;
    // An image copied from a page often comes with its address as text: the image is meant.
    event.preventDefault();
    attach(files);
  });
  const composer = $('composer');
  const carriesFiles = (event) => event.dataTransfer && [...event.dataTransfer.types].includes('Files');
  composer.addEventListener('dragover', (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    composer.classList.add('dropping');
  });
  composer.addEventListener('dragleave', () => composer.classList.remove('dropping'));
  composer.addEventListener('drop', (event) => {
    composer.classList.remove('dropping');
    if (!carriesFiles(event)) return;
    event.preventDefault();
    attach([...event.dataTransfer.files]);
    $('message').focus();
  });
}
