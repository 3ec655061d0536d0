// Accessibility, dark mode and the screenshots: one realistic scene (Markdown, tool cards, a
// running turn with a waiting message, a failed and an interrupted conversation in the list),
// seen at 1400×900 and 420×800, light and dark. Each view is checked by axe-core (no finding of
// any impact) and saved as a PNG under OPENVAALA_SCREENSHOTS for people to look at. Dark
// mode follows prefers-color-scheme. The accessibility structure is checked too: live regions
// only on status lines and finished messages, a labelled message box, tab roles, a sidebar row
// whose only tab stop is its link, with its actions in a menu (a11y.test.js: the whole list is
// one tab stop).
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, checkAxe, inEachView, screenshot, startConversation, waitIdle, waitRunning, withUi } = require('./harness');

const REPLY = [
  'Here is the **release checklist**. I checked the `Cargo.toml` version and wrote the notes.',
  '',
  '1. Run the whole test suite',
  '2. Tag the release: `git tag v0.2.0`',
  '3. Publish the notes',
  '',
  '| check | result |',
  '|---|---|',
  '| tests | passed |',
  '| lints | clean |',
  '',
  '```rust',
  'fn main() {',
  '    println!("release {}", env!("CARGO_PKG_VERSION"));',
  '}',
  '```',
].join('\n');

// Builds the scene; returns a function that lets the running turn finish.
async function buildScene(page, fake) {
  const api = (path, body) =>
    page.evaluate(
      // With the token the page keeps, as its own calls carry it.
      async ([p, b]) => (await fetch(p, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${localStorage.getItem('openvaala.token')}` },
        body: JSON.stringify(b),
      })).json(),
      [path, body],
    );
  // A conversation whose last turn failed, and one that was interrupted.
  fake.push({ status: 400, message: 'the model refuses this request' });
  await api('/api/conversations', { text: 'Deploy to staging' });
  await page.locator('#conversation-list li.conv.failed').waitFor();
  // Its answer is held, so it is still working when the interrupt comes.
  const analysis = fake.hold({ text: 'never sent: the turn is interrupted first' });
  const slow = await api('/api/conversations', { text: 'Analyse the whole code base' });
  await analysis.requested;
  await page.locator('#conversation-list li.conv.running').waitFor();
  await api(`/api/conversations/${slow.conversation.id}/interrupt`, {});
  await page.locator('#conversation-list li.conv.interrupted').waitFor();

  // The open one: tools, a Markdown answer, then a turn that is still running with a message
  // waiting for it.
  fake.push(
    { tool: 'shell', args: { command: 'cargo test --quiet 2>&1 | tail -3' } },
    { tool: 'write_file', args: { path: 'RELEASE.md', content: '# Release 0.2.0\n\n- faster turns\n- a clearer web UI\n' } },
    { text: REPLY },
  );
  await startConversation(page, 'Prepare the release checklist');
  await page.locator('#items .item.agent-message.status-completed .code-block').waitFor();
  await waitIdle(page);
  const announcement = fake.hold({ text: 'Done.' });
  await page.fill('#message', 'Now write the announcement');
  await page.press('#message', 'Enter');
  await waitRunning(page);
  await page.fill('#message', 'Keep it under 100 words');
  await page.press('#message', 'Enter');
  await page.locator('#pending-list li.pending-item').waitFor();
  return () => announcement.release();
}

async function dark(page) {
  return page.evaluate(() => {
    const [r, g, b] = getComputedStyle(document.body).backgroundColor.match(/\d+/g).map(Number);
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255 < 0.3;
  });
}

test('the scene at 1400×900 and 420×800, light and dark: screenshots and axe-core', { timeout: 180_000 }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    const release = await buildScene(page, fake);
    await inEachView(page, async (size, scheme) => {
      // Dark mode follows prefers-color-scheme.
      assert.equal(await dark(page), scheme === 'dark', `${size} ${scheme}`);
      await page.locator('#items').evaluate(() => document.getElementById('timeline').scrollTo(0, 1e9));
      await screenshot(page, `${size}-${scheme}`);
      await checkAxe(page, `${size} ${scheme}`);

      if (size === 'phone') {
        await page.click('#sidebar-open');
        await page.locator('#sidebar').evaluate((node) => new Promise((resolve) => {
          if (getComputedStyle(node).transform === 'none') resolve();
          else node.addEventListener('transitionend', () => resolve(), { once: true });
        }));
        await screenshot(page, `${size}-${scheme}-list`);
        await checkAxe(page, `${size} ${scheme}, list open`);
        await page.keyboard.press('Escape');
        await page.locator('body:not(.sidebar-open)').waitFor();
        await page.click('#header-menu');
        await page.locator('.menu').waitFor();
        await screenshot(page, `${size}-${scheme}-menu`);
        await page.keyboard.press('Escape');
      } else {
        await page.click('#tab-agents');
        await page.locator('#agents-empty').waitFor();
        await screenshot(page, `${size}-${scheme}-agents`);
        await checkAxe(page, `${size} ${scheme}, Agents tab`);
        await page.click('#tab-conversation');
      }
    });
    release();
    await page.locator('#items .item.agent-message', { hasText: 'Done.' }).waitFor();
  }));

test('live regions: only status lines and finished messages; streamed text is never live', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    await startConversation(page, 'warm up');
    await waitIdle(page);
    // What the announcer said, and every live region or status role on the page.
    await page.evaluate(() => {
      window.__announced = [];
      new MutationObserver(() => {
        const text = document.getElementById('announcer').textContent;
        if (text) window.__announced.push(text);
      }).observe(document.getElementById('announcer'), { childList: true, characterData: true, subtree: true });
    });
    // The answer streams in small pieces; its end is held until the page has been looked at
    // while the text streams.
    const gate = fake.hold({ text: ' in many small pieces, one after another.', chunkChars: 3, paceMs: 20 });
    await page.fill('#message', 'stream please');
    await page.press('#message', 'Enter');
    for (const piece of ['A s', 'tre', 'amed', ' **ans', 'wer**', ' that', ' arrives']) await gate.write(piece);
    const streaming = page.locator('#items .item.agent-message.status-running .md');
    await streaming.filter({ hasText: 'A streamed' }).waitFor();
    // No ancestor of the streaming text is a live region.
    const liveAncestors = await streaming.evaluate((node) => {
      const found = [];
      for (let n = node; n; n = n.parentElement) {
        const role = n.getAttribute && n.getAttribute('role');
        if ((n.hasAttribute && n.hasAttribute('aria-live')) || ['status', 'log', 'alert', 'marquee', 'timer'].includes(role)) found.push(n.id || n.className);
      }
      return found;
    });
    assert.deepEqual(liveAncestors, []);
    const regions = await page.evaluate(() =>
      [...document.querySelectorAll('[aria-live], [role="status"], [role="alert"], [role="log"]')].map((n) => n.id || n.className),
    );
    for (const region of regions) {
      assert.match(region, /^(announcer|running-indicator|list-connection|line .*|banner .*|approval-error)$/, `unexpected live region: ${region}`);
    }
    gate.release();
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'one after another' }).waitFor();
    // The streamed answer is announced once, whole. (The warm-up reply may be announced too, if
    // it streamed after the page connected: that is not this answer.)
    await page.waitForFunction(() => window.__announced.some((text) => text.includes('A streamed')));
    const announced = await page.evaluate(() => window.__announced.filter((text) => text.includes('A streamed')));
    assert.deepEqual(announced, ['Agent: A streamed answer that arrives in many small pieces, one after another.']);
  }));

test('the message box has a label, the tabs have tab roles, and a sidebar row is one tab stop', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    assert.equal(await page.getByLabel('Message to the agent').getAttribute('id'), 'message');
    await startConversation(page, 'hello');
    await page.locator('#items .item.agent-message.status-completed').waitFor();

    assert.equal(await page.getByRole('tablist').count(), 1);
    const tabs = page.getByRole('tab');
    assert.deepEqual(await tabs.allTextContents(), ['Conversation', 'Agents ']);
    assert.equal(await page.getByRole('tab', { name: 'Conversation' }).getAttribute('aria-selected'), 'true');
    await page.getByRole('tab', { name: 'Conversation' }).focus();
    await page.keyboard.press('ArrowRight');
    assert.equal(await page.getByRole('tab', { name: /Agents/ }).getAttribute('aria-selected'), 'true');
    await page.getByRole('tabpanel', { name: /Agents/ }).waitFor();

    // The open row's one tab stop is its link. The actions are a menu button outside the tab order.
    const row = page.locator('#conversation-list li.conv').first();
    const stops = await row.evaluate((li) => [...li.querySelectorAll('a, button, input, [tabindex]')].filter((n) => n.tabIndex >= 0).map((n) => n.tagName));
    assert.deepEqual(stops, ['A']);
    assert.equal(await row.locator('button.conv-menu').getAttribute('aria-haspopup'), 'menu');
    await row.locator('a.conv-link').focus();
    await page.keyboard.press('Shift+F10');
    assert.equal(await page.getByRole('menu').count(), 1);
    assert.deepEqual(await page.getByRole('menuitem').allTextContents(), ['Rename', 'Archive', 'Delete…']);
    await checkAxe(page, 'row menu open');
  }));
