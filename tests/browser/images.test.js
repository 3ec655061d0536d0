// Images in the message box: pasted into it or dropped on the composer, shown as thumbnails
// with a remove button before sending, and sent with the message (the first one of a new
// conversation, or a later one); until then they stay with their conversation, like its draft.
// A file that is not an image the models take is refused.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { TEST_TIMEOUT, apiGet, conversationId, screenshot, waitIdle, withUi } = require('./harness');

// A 2×2 PNG, red and blue pixels, as the clipboard or a file manager would hand it over.
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP4z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==';

// Pastes (into the message box) or drops (on the composer) files made of base64 data.
function handOver(page, how, files) {
  return page.evaluate(
    ({ how, files }) => {
      const transfer = new DataTransfer();
      for (const { name, type, data } of files) {
        const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
        transfer.items.add(new File([bytes], name, { type }));
      }
      if (how === 'paste') {
        document.getElementById('message').dispatchEvent(new ClipboardEvent('paste', { clipboardData: transfer, bubbles: true, cancelable: true }));
      } else {
        const composer = document.getElementById('composer');
        composer.dispatchEvent(new DragEvent('dragover', { dataTransfer: transfer, bubbles: true, cancelable: true }));
        composer.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
      }
    },
    { how, files },
  );
}

test('an image pasted or dropped into the message box shows as a thumbnail, can be removed, and is sent', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, server }) => {
    await page.locator('#main[data-view="new"] #message').waitFor();
    const thumbnails = page.locator('#attachments .attachment img');
    assert.equal(await page.locator('#attachments').isVisible(), false, 'nothing attached: no row');

    await handOver(page, 'paste', [{ name: 'first.png', type: 'image/png', data: PNG }]);
    await thumbnails.first().waitFor();
    assert.equal(await thumbnails.first().getAttribute('alt'), 'Attached image 1 (first.png)');
    // Removed with its button.
    await page.locator('#attachments button', { hasText: '×' }).click();
    await page.locator('#attachments').waitFor({ state: 'hidden' });

    // Not an image the models take: refused, and said.
    await handOver(page, 'drop', [{ name: 'notes.txt', type: 'text/plain', data: btoa('hello') }]);
    await page.locator('#banners .banner.error', { hasText: 'notes.txt cannot be attached: only PNG, JPEG, GIF and WebP images can.' }).waitFor();

    // Two images, one pasted and one dropped, go with the first message.
    await handOver(page, 'paste', [{ name: 'first.png', type: 'image/png', data: PNG }]);
    await handOver(page, 'drop', [{ name: 'second.png', type: 'image/png', data: PNG }]);
    await page.waitForFunction(() => document.querySelectorAll('#attachments .attachment').length === 2);
    assert.equal(await page.locator('#attachments button').nth(1).getAttribute('aria-label'), 'Remove attached image 2 (second.png)');
    await page.fill('#message', 'what is in these pictures?');
    await page.press('#message', 'Enter');
    const sent = page.locator('#items .item.user-message', { hasText: 'what is in these pictures?' });
    await sent.waitFor();
    await page.waitForFunction(() => document.querySelectorAll('#items .item.user-message img').length === 2);
    assert.equal(await page.locator('#attachments').isVisible(), false, 'sent: the box is empty of them');
    await waitIdle(page);
    const id = conversationId(page);
    const stored = await apiGet(server(), `/api/conversations/${encodeURIComponent(id)}/items`);
    const message = stored.items.find((item) => item.kind === 'user_message');
    assert.deepEqual(message.images, [
      { media_type: 'image/png', data: PNG },
      { media_type: 'image/png', data: PNG },
    ]);

    // A later message can be an image alone. Attached, it stays with its conversation while the
    // user looks elsewhere.
    await handOver(page, 'paste', [{ name: 'third.png', type: 'image/png', data: PNG }]);
    await thumbnails.first().waitFor();
    await screenshot(page, 'image-attached');
    await page.click('#new-conversation');
    await page.locator('#main[data-view="new"]').waitFor();
    assert.equal(await page.locator('#attachments').isVisible(), false, 'not in the new conversation');
    await page.locator('#conversation-list li.conv').first().click();
    await page.locator('#main[data-state="idle"]').waitFor();
    assert.equal(await thumbnails.first().getAttribute('alt'), 'Attached image 1 (third.png)');
    await page.click('#send');
    await page.waitForFunction(() => document.querySelectorAll('#items .item.user-message').length === 2);
    await page.waitForFunction(() => document.querySelectorAll('#items .item.user-message img').length === 3);
    await waitIdle(page);
  }));

test('the attach button opens the file picker; the images picked are sent, and the demo model says what it got', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, server, root }) => {
    await page.locator('#main[data-view="new"] #message').waitFor();
    const picked = [path.join(root, 'photo.png'), path.join(root, 'notes.txt')];
    fs.writeFileSync(picked[0], Buffer.from(PNG, 'base64'));
    fs.writeFileSync(picked[1], 'not an image');

    // Reachable from the keyboard, and named for a screen reader.
    const button = page.getByRole('button', { name: 'Attach images' });
    assert.equal(await button.count(), 1);
    const chooser = page.waitForEvent('filechooser');
    await button.click();
    const files = await chooser;
    assert.equal(files.isMultiple(), true);
    await files.setFiles(picked);
    await page.locator('#attachments .attachment img[alt="Attached image 1 (photo.png)"]').waitFor();
    await page.locator('#banners .banner.error', { hasText: 'notes.txt cannot be attached' }).waitFor();
    assert.equal(await page.locator('#attachments .attachment').count(), 1, 'only the image is attached');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'message', 'back to the message box');

    await page.fill('#message', 'what is this?');
    await page.press('#message', 'Enter');
    const bytes = Buffer.from(PNG, 'base64').length;
    await page.locator('#items .item.agent-message.status-completed', { hasText: `You attached an image (PNG, ${bytes} bytes)` }).waitFor();
    await waitIdle(page);
    const id = conversationId(page);
    const stored = await apiGet(server(), `/api/conversations/${encodeURIComponent(id)}/items`);
    assert.deepEqual(stored.items.find((item) => item.kind === 'user_message').images, [{ media_type: 'image/png', data: PNG }]);
    await screenshot(page, 'image-picked');
  }));
