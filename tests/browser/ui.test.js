// The web UI's main paths: with the built-in demo model a first message, a shell call and a
// fork; with the fake provider (whose reply the test holds while the agent works) context
// compression, and waiting messages with the Agents tab. harness.js starts the binary and the browser.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, messageTexts, sendMessage, startConversation, waitForReply, waitIdle, waitRunning, withUi } = require('./harness');

test('a first message gets the demo reply and the conversation is listed under its title', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    const id = await startConversation(page, 'Hello from the browser');

    await page.locator('#items .item.user-message .text', { hasText: 'Hello from the browser' }).waitFor();
    await waitForReply(page, 'Hello from the browser');
    assert.equal(await page.textContent('#conversation-title'), 'Hello from the browser');

    const row = page.locator('#conversation-list li.conv.selected');
    await row.locator('.conv-title', { hasText: 'Hello from the browser' }).waitFor();
    assert.equal(await row.locator('a.conv-link').getAttribute('href'), `#/c/${encodeURIComponent(id)}`);
    assert.equal(await page.locator('#conversation-list li.conv').count(), 1);
  }));

test('/shell runs the shell tool and its card shows the command, the output and the exit code', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await startConversation(page, '/shell echo browser-test-output');

    const tool = page.locator('#items .item.tool-call.tool-shell');
    await tool.locator('.tool-subject', { hasText: '$ echo browser-test-output' }).waitFor();
    await tool.locator('pre.output', { hasText: 'browser-test-output' }).waitFor();
    await tool.locator('.tool-state.state-ran', { hasText: 'ran · exit 0' }).waitFor();
    const reply = await waitForReply(page, '/shell echo browser-test-output');
    assert.match(await reply.textContent(), /The shell tool returned \d+ bytes \(exit code 0\)\./);
  }));

test('"Compress context" says it works, then what it did; the earlier turn is marked; a second press has nothing older', { timeout: TEST_TIMEOUT }, () =>
  // "Nothing older" is the service's 409, which the browser logs.
  withUi({ fake: true, allowConsole: [/status of 409/] }, async ({ page, fake }) => {
    await startConversation(page, 'first question');
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Echo: first question' }).waitFor();
    await waitIdle(page);
    // One turn: nothing is older than it, and the page says so (no summary is made).
    await page.click('#compact');
    const notice = page.locator('#banners .banner.notice[data-key="compaction"] .banner-text');
    await notice.filter({ hasText: /^Nothing older to compress/ }).waitFor();
    await page.fill('#message', 'second question');
    await page.press('#message', 'Enter');
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Echo: second question' }).waitFor();
    await waitIdle(page);

    // The summary is held: meanwhile the button and a status line say it works.
    const gate = fake.hold({ text: 'The user asked a first question.' });
    await page.click('#compact');
    await gate.requested;
    const button = page.locator('#compact');
    assert.equal(await button.textContent(), 'Compressing…');
    assert.equal(await button.getAttribute('aria-disabled'), 'true');
    await page.locator('#status-lines .line.compaction', { hasText: 'Compressing the context' }).waitFor();
    gate.release();
    const summary = page.locator('#items details.item.summary');
    await summary.locator('summary', { hasText: 'Context summary' }).waitFor();
    await page.locator('#status-lines .line.compaction').waitFor({ state: 'detached' });
    // What it did: the first turn's two messages, and the context before and after.
    await notice.filter({ hasText: /^Context compressed/ }).waitFor();
    assert.match(await notice.textContent(), /^Context compressed: 2 earlier items summarized, [\d.]+k? → [\d.]+k? tokens\.$/);
    await page.locator('#compact', { hasText: 'Compress context' }).waitFor();
    assert.equal(await button.getAttribute('aria-disabled'), 'false');
    // The summary names no internal number.
    assert.doesNotMatch(await summary.locator('summary').textContent(), /#\d/);

    // In a short history only the last turn stays outside the summary.
    const checkBadges = async () => {
      const messages = page.locator('#items .item.user-message, #items .item.agent-message');
      await messages.nth(3).waitFor();
      assert.equal(await messages.count(), 4);
      for (const [index, compacted] of [true, true, false, false].entries()) {
        const item = messages.nth(index);
        const text = await item.locator('.text, .md').first().textContent();
        assert.equal(text.includes('first question'), compacted, `item ${index}: ${text}`);
        assert.equal(await item.locator('.badge.compacted').count(), compacted ? 1 : 0, `item ${index}: ${text}`);
      }
      assert.equal(await summary.count(), 1);
      assert.equal(await summary.locator('.badge.compacted').count(), 0);
    };
    await checkBadges();

    // A second press: the latest turn is never summarized.
    await page.click('#compact');
    await notice.filter({ hasText: /^Nothing older to compress/ }).waitFor();
    await checkBadges();

    // The same after a reload, from the stored history.
    await page.reload();
    await summary.locator('summary', { hasText: 'Context summary' }).waitFor();
    await checkBadges();
  }));

test('a message sent while the agent works waits with its actions; the Agents tab and the sidebar follow the turn', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    // The first answer is held until the test has seen the turn at work.
    const gate = fake.hold({ text: 'Done with the first.' });
    await startConversation(page, 'busy for a while');
    await gate.requested;
    await waitRunning(page);
    await page.fill('#message', 'wait for me');
    await page.press('#message', 'Enter');
    const waiting = page.locator('#pending-list li.pending-item', { hasText: 'wait for me' });
    await waiting.locator('button', { hasText: 'Interrupt with this' }).waitFor();
    const actions = await waiting.locator('button').allTextContents();
    assert.deepEqual(actions, ['Edit', 'Withdraw', 'Interrupt with this']);
    assert.ok(!(await waiting.textContent()).includes('null'), await waiting.textContent());

    await page.click('#tab-agents');
    const main = page.locator('#agents li.agent-row', { hasText: 'main agent' });
    await main.locator('.badge', { hasText: 'working' }).waitFor();
    // The waiting message is answered (by this turn or the next; the fake echoes it); then the
    // main agent is idle and shows its last answer, without a reload.
    gate.release();
    await main.locator('.badge', { hasText: 'idle' }).waitFor();
    await main.getByText('Echo: wait for me', { exact: false }).waitFor();
    await page.waitForFunction(() => !document.querySelector('#conversation-list li.conv')?.textContent.includes('working'));
  }));

test('Fork opens a new conversation with the same messages', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    const source = await startConversation(page, 'fork me');
    await waitForReply(page, 'fork me');
    await sendMessage(page, 'and this too');
    const before = await messageTexts(page);
    assert.equal(before.length, 4);

    await page.click('#fork');
    await page.waitForURL((url) => /^#\/c\/[^/]+$/.test(url.hash) && !url.hash.endsWith(encodeURIComponent(source)));
    await page.locator('#conversation-title', { hasText: 'fork me (fork)' }).waitFor();
    await page.locator('#items .item.agent-message', { hasText: 'and this too' }).waitFor();
    assert.deepEqual(await messageTexts(page), before);

    // Both are listed, the fork selected.
    await page.locator('#conversation-list li.conv.selected .conv-title', { hasText: 'fork me (fork)' }).waitFor();
    await page.locator('#conversation-list li.conv').nth(1).waitFor();
    assert.equal(await page.locator('#conversation-list li.conv').count(), 2);
  }));
