// On a phone (420×800) the header is one line plus the meter, the list is reachable, the waiting
// messages scroll in their own area (the message box stays in view), buttons stay tappable, and
// nothing makes the page scroll sideways.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { PHONE, TEST_TIMEOUT, conversationId, screenshot, startConversation, waitIdle, waitRunning, withUi } = require('./harness');

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

// The boxes of the controls a phone shows outside the timeline's scrolled content (where the
// header, the meter, the waiting messages and the composer are), and of the "New output" pill:
// the pairs that overlap, by name. An element inside another (a select in its label) is no
// overlap.
function overlaps(page) {
  return page.evaluate(() => {
    const selector = 'button, select, input, textarea, [role="tab"], [role="meter"], #usage-figures, #usage-threshold-label, #conversation-title';
    const shown = [...document.querySelectorAll(selector)].filter((node) => {
      if (node.closest('#timeline, #sidebar, .menu')) return false;
      const box = node.getBoundingClientRect();
      return box.width > 1 && box.height > 1 && node.checkVisibility({ visibilityProperty: true });
    });
    const name = (node) => node.id || node.getAttribute('aria-label') || `${node.tagName.toLowerCase()}.${node.className}`;
    const found = [];
    for (let i = 0; i < shown.length; i++) {
      for (let j = i + 1; j < shown.length; j++) {
        const [a, b] = [shown[i], shown[j]];
        if (a.contains(b) || b.contains(a)) continue;
        const p = a.getBoundingClientRect();
        const q = b.getBoundingClientRect();
        const width = Math.min(p.right, q.right) - Math.max(p.left, q.left);
        const height = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
        if (width > 0.5 && height > 0.5) found.push(`${name(a)} × ${name(b)}`);
      }
    }
    return found;
  });
}

const paragraphs = (from, to) =>
  Array.from({ length: to - from + 1 }, (_, n) => `Paragraph ${from + n} of a long answer that keeps coming.`).join('\n\n') + '\n\n';

test('on a phone no control overlaps another: a long conversation, its details shown, the "New output" pill', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true, viewport: PHONE }, async ({ page, fake }) => {
    fake.push({ text: 'A short answer.' });
    await startConversation(page, 'A conversation that grows long');
    await waitIdle(page);
    const header = page.locator('#conversation-header');
    const short = await header.boundingBox();
    assert.deepEqual(await overlaps(page), [], 'a short conversation');

    // A long one: the header keeps its height and the title stays whole in height.
    fake.push({ text: paragraphs(1, 150) });
    await page.fill('#message', 'now a long answer');
    await page.press('#message', 'Enter');
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Paragraph 150' }).waitFor();
    await waitIdle(page);
    assert.ok(await page.locator('#timeline').evaluate((t) => t.scrollHeight > 5 * t.clientHeight));
    assert.deepEqual(await header.boundingBox(), short, 'the header keeps its size');
    assert.ok(await page.locator('#conversation-title').evaluate((h) => h.scrollHeight <= h.clientHeight + 1));
    assert.deepEqual(await overlaps(page), [], 'a long conversation');
    await screenshot(page, 'phone-long');

    // The details (directory, agent, the model select) push the meter down, never under it.
    await page.click('#header-menu');
    await page.getByRole('menuitem', { name: 'Show details' }).click();
    await page.locator('#conversation-meta select.model-switch').waitFor();
    assert.deepEqual(await overlaps(page), [], 'details shown');
    const meter = await page.locator('#usage').boundingBox();
    const grown = await header.boundingBox();
    assert.ok(meter.y >= grown.y + grown.height - 1, JSON.stringify({ grown, meter }));
    await screenshot(page, 'phone-details');
    await page.click('#header-menu');
    await page.getByRole('menuitem', { name: 'Hide details' }).click();
    await page.waitForFunction(() => !document.body.classList.contains('show-meta'));

    // A running turn (Interrupt, the mode select, a waiting message) while the reader has
    // scrolled up: the pill sits in the timeline, clear of all of them.
    const gate = fake.hold({ text: 'The end.' });
    await page.fill('#message', 'and more');
    await page.press('#message', 'Enter');
    await waitRunning(page);
    await page.fill('#message', 'a waiting message');
    await page.press('#message', 'Enter');
    await page.locator('#pending-list li.pending-item').waitFor();
    await gate.write(paragraphs(1, 10));
    await page.locator('#items .item.agent-message.status-running', { hasText: 'Paragraph 10' }).waitFor();
    const timeline = page.locator('#timeline');
    const box = await timeline.boundingBox();
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, -100_000);
    await page.waitForFunction(() => document.getElementById('timeline').scrollTop === 0);
    await gate.write(paragraphs(11, 20));
    const pill = page.locator('#new-output', { hasText: 'New output below' });
    await pill.waitFor({ state: 'visible' });
    const pillBox = await pill.boundingBox();
    const timelineBox = await timeline.boundingBox();
    assert.ok(
      pillBox.y >= timelineBox.y && pillBox.y + pillBox.height <= timelineBox.y + timelineBox.height && pillBox.x >= 0 && pillBox.x + pillBox.width <= PHONE.width,
      `the pill is inside the timeline: ${JSON.stringify({ pillBox, timelineBox })}`,
    );
    assert.ok(await page.locator('#interrupt').isVisible());
    assert.ok(await page.locator('#mode').isVisible());
    assert.deepEqual(await overlaps(page), [], 'the pill shown');
    await screenshot(page, 'phone-pill');
    gate.release();
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'The end.' }).waitFor();
  }));

test('on a touch screen Return adds a line and Send sends', { timeout: TEST_TIMEOUT }, () =>
  withUi({ viewport: PHONE, hasTouch: true }, async ({ page }) => {
    assert.equal(await page.evaluate(() => matchMedia('(pointer: coarse)').matches), true);
    await page.locator('#main[data-view="new"] #message').waitFor();
    await page.locator('#message').tap();
    await page.keyboard.type('/sleep 10');
    await page.keyboard.press('Enter');
    await page.keyboard.type('the second line');
    assert.equal(await page.inputValue('#message'), '/sleep 10\nthe second line');
    assert.equal(await page.locator('#main').getAttribute('data-view'), 'new');
    await page.locator('#send').tap();
    await page.waitForURL(/#\/c\/[^/]+$/);
    const message = page.locator('#items .item.user-message .text');
    await message.waitFor();
    assert.equal(await message.textContent(), '/sleep 10\nthe second line');
    await waitIdle(page);
  }));
