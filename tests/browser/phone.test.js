// On a phone (420×800) the header is one line plus the meter, the list is reachable, the waiting
// messages scroll in their own area (the message box stays in view), buttons stay tappable, and
// nothing makes the page scroll sideways.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { PHONE, TEST_TIMEOUT, conversationId, startConversation, waitIdle, waitRunning, withUi } = require('./harness');

// Smallest height of anything tappable on a phone, in CSS pixels.
const TAP_MIN = 32;

test('on a phone: a one-line header with the meter, the list reachable, waiting messages that scroll, tappable buttons', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true, viewport: PHONE }, async ({ page, fake }) => {
    await startConversation(page, 'an earlier conversation');
    await waitIdle(page);
    const first = conversationId(page);
    await page.click('#sidebar-open');
    await page.click('#new-conversation');
    const gate = fake.hold({ text: 'Done at last.' });
    await startConversation(page, 'A conversation with a rather long title that cannot fit on one line of a phone');
    await waitRunning(page);
    for (let n = 1; n <= 6; n++) {
      await page.fill('#message', `waiting message number ${n}\nwith a second line`);
      await page.press('#message', 'Enter');
      await page.locator('#pending-list li.pending-item', { hasText: `number ${n}` }).waitFor();
    }
    await page.locator('#usage').waitFor();

    // One line of header: menu button, title (cut with an ellipsis), actions menu.
    const header = await page.locator('#conversation-header').boundingBox();
    assert.ok(header.height <= 52, `header height ${header.height}`);
    const title = page.locator('#conversation-title');
    assert.ok(await title.evaluate((h) => h.scrollWidth > h.clientWidth && getComputedStyle(h).textOverflow === 'ellipsis'));
    assert.ok(await title.evaluate((h) => h.getBoundingClientRect().height < parseFloat(getComputedStyle(h).lineHeight) * 1.5 + 4));
    assert.equal(await page.locator('#conversation-meta').isVisible(), false);
    // The meter, in figures, on the line below (beside the tabs), not in the header.
    const meter = await page.locator('#usage').boundingBox();
    assert.ok(meter.y >= header.y + header.height - 1 && meter.y + meter.height <= header.y + header.height + 52, JSON.stringify({ header, meter }));
    assert.match(await page.textContent('#usage-figures'), /tokens$/);
    assert.ok(await page.locator('#usage-threshold-label').isVisible());

    // The waiting messages scroll in their own area; the message box and Send stay in view.
    const pending = page.locator('#pending');
    const box = await pending.boundingBox();
    assert.ok(box.height <= PHONE.height * 0.3, `waiting area height ${box.height}`);
    assert.ok(await pending.evaluate((p) => p.scrollHeight > p.clientHeight + 20 && getComputedStyle(p).overflowY === 'auto'));
    for (const selector of ['#message', '#send', '#interrupt']) {
      const b = await page.locator(selector).boundingBox();
      assert.ok(b.y >= 0 && b.y + b.height <= PHONE.height && b.x >= 0 && b.x + b.width <= PHONE.width, `${selector} in view: ${JSON.stringify(b)}`);
    }

    // Everything tappable is big enough, and nothing scrolls sideways.
    const small = await page.evaluate((min) => {
      const found = [];
      for (const node of document.querySelectorAll('button, select, input, a.conv-link, [role="tab"]')) {
        const b = node.getBoundingClientRect();
        const shown = b.width > 0 && b.height > 0 && getComputedStyle(node).visibility !== 'hidden' && !node.closest('[hidden]');
        if (shown && node.closest('#sidebar') === null && b.height < min) found.push(`${node.id || node.className || node.textContent}: ${b.height}`);
      }
      return found;
    }, TAP_MIN);
    assert.deepEqual(small, []);
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));

    // The list is one tap away, and a tap on a row opens it and closes the list.
    await page.click('#sidebar-open');
    const link = page.locator(`#conversation-list a.conv-link[href="#/c/${encodeURIComponent(first)}"]`);
    await link.waitFor();
    const row = await link.boundingBox();
    assert.ok(row.x >= 0 && row.height >= 40, `row ${JSON.stringify(row)}`);
    await link.click();
    await page.waitForURL((url) => url.hash.endsWith(encodeURIComponent(first)));
    await page.locator('#conversation-title', { hasText: 'an earlier conversation' }).waitFor();
    await page.waitForFunction(() => !document.body.classList.contains('sidebar-open'));
    gate.release();
  }));
