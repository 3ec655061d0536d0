// Background processes (`shell` with `background: true`): a panel above the message box shows
// each one with its command and status as the list events bring them, its output when asked
// (followed live while it runs), a Stop button while it runs, and the ports it listens on as
// links; after a reload the list is read again.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { DESKTOP, TEST_TIMEOUT, apiGet, checkAxe, inEachView, screenshot, startConversation, waitIdle, withUi } = require('./harness');

const AGENTS = `
[agents.default]
description = "test agent"
model = "m"
tools = ["shell"]
[agents.default.permissions]
shell = "allow"
`;

test('a background process shows running with its output, and Stop stops it', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: AGENTS } }, async ({ page, fake, server }) => {
    // Every output stream the page opens, to tell which are still open.
    await page.addInitScript(() => {
      const Original = window.EventSource;
      window.__outputStreams = [];
      window.EventSource = class extends Original {
        constructor(url, options) {
          super(url, options);
          if (String(url).includes('/output')) window.__outputStreams.push(this);
        }
      };
    });
    await page.reload();
    const openStreams = () => page.evaluate(() => window.__outputStreams.filter((source) => source.readyState !== 2).length);
    fake.push({ tool: 'shell', args: { command: 'echo ready; sleep 30', background: true } }, { text: 'It runs in the background.' });
    const id = await startConversation(page, 'start it');
    await page.locator('#items .item.agent-message', { hasText: 'It runs in the background.' }).waitFor();
    await waitIdle(page);

    // The process started after the conversation opened: the list event brought it.
    const panel = page.locator('#processes');
    const row = panel.locator('.process.status-running');
    await row.waitFor();
    assert.equal(await page.locator('#processes-count').textContent(), '1 running');
    assert.equal(await row.locator('.process-command').textContent(), 'echo ready; sleep 30');
    assert.equal(await row.locator('.process-status').textContent(), 'running');
    assert.equal(await row.locator('.process-status .spinner').count(), 1);
    // Above the message box.
    const above = await page.evaluate(() => document.getElementById('processes').getBoundingClientRect().bottom <= document.getElementById('message').getBoundingClientRect().top);
    assert.ok(above, 'the panel is above the message box');

    // The output is folded until asked for, then followed live.
    const toggle = row.locator('.process-output-toggle');
    assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
    assert.equal(await row.locator('.process-output').isHidden(), true);
    assert.equal(await toggle.textContent(), 'Output of echo ready; sleep 30');
    await toggle.click();
    assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
    await row.locator('.process-output', { hasText: 'ready' }).waitFor();
    assert.equal((await row.locator('.process-output').textContent()).trim(), 'ready');
    assert.equal(await openStreams(), 1);
    // Out of sight, the output is not followed: the panel folded, or the Agents tab shown.
    await page.click('#processes-toggle');
    assert.equal(await page.locator('#process-list').isHidden(), true);
    assert.equal(await openStreams(), 0);
    await page.click('#processes-toggle');
    assert.equal(await openStreams(), 1);
    await page.click('#tab-agents');
    assert.equal(await openStreams(), 0);
    await page.click('#tab-conversation');
    assert.equal(await openStreams(), 1);
    assert.equal((await row.locator('.process-output').textContent()).trim(), 'ready');

    await checkAxe(page, 'processes panel');
    await screenshot(page, 'processes-panel');
    await inEachView(page, async (size, scheme) => {
      await checkAxe(page, `processes panel, ${size} ${scheme}`);
      await screenshot(page, `processes-${size}-${scheme}`);
    });
    await page.setViewportSize(DESKTOP);
    await page.emulateMedia({ colorScheme: 'light' });

    // Stop: the row says stopped, why, and has no Stop button any more; a screen reader hears it.
    const stop = row.locator('.process-stop');
    assert.equal(await stop.textContent(), 'Stop of echo ready; sleep 30');
    await stop.click();
    const stopped = panel.locator('.process.status-killed');
    await stopped.waitFor();
    assert.equal(await stopped.locator('.process-status').textContent(), 'stopped');
    assert.equal(await stopped.locator('.process-reason').textContent(), 'a user stopped it');
    assert.equal(await stopped.locator('.process-stop').isHidden(), true);
    // The ended process's stream closed with it.
    await page.waitForFunction(() => window.__outputStreams.every((source) => source.readyState === 2));
    assert.equal(await page.locator('#processes-count').textContent(), '1 ended');
    await page.waitForFunction(() => document.getElementById('announcer').textContent === 'Background process stopped: echo ready; sleep 30');
    // The output stays readable.
    assert.equal((await stopped.locator('.process-output').textContent()).trim(), 'ready');
    const listed = await apiGet(server(), `/api/conversations/${id}/processes`);
    assert.deepEqual(
      listed.processes.map((process) => [process.command, process.status]),
      [['echo ready; sleep 30', 'killed']],
    );
    await checkAxe(page, 'processes panel, stopped');
    await screenshot(page, 'processes-stopped');

    // After a reload the list is read again; with nothing running the panel starts folded.
    await page.reload();
    await waitIdle(page);
    await panel.waitFor();
    assert.equal(await page.locator('#processes-toggle').getAttribute('aria-expanded'), 'false');
    assert.equal(await page.locator('#process-list').isHidden(), true);
    assert.equal(await page.locator('#processes-count').textContent(), '1 ended');
    await page.click('#processes-toggle');
    await panel.locator('.process.status-killed .process-status', { hasText: 'stopped' }).waitFor();
    await panel.locator('.process-output-toggle').click();
    await panel.locator('.process-output', { hasText: 'ready' }).waitFor();

    // Another conversation has none: no panel.
    await page.click('#new-conversation');
    await page.locator('#main[data-view="new"]').waitFor();
    assert.equal(await panel.isHidden(), true);
  }));

function hasPython() {
  try {
    execFileSync('python3', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

// The network on: the process listens where the service (and the page's host) can reach it.
const SERVING_AGENTS = `
[agents.default]
description = "test agent"
model = "m"
tools = ["shell"]
network = true
[agents.default.permissions]
shell = "allow"
`;

test('a process listening on a port shows the port as a link', { timeout: TEST_TIMEOUT, skip: !hasPython() && 'python3 is not installed' }, () =>
  withUi({ fake: { agents: SERVING_AGENTS } }, async ({ page, fake }) => {
    const command = 'exec python3 -u -m http.server 0 --bind 127.0.0.1';
    fake.push({ tool: 'shell', args: { command, background: true } }, { text: 'Serving.' });
    await startConversation(page, 'serve the files');
    await page.locator('#items .item.agent-message', { hasText: 'Serving.' }).waitFor();
    const row = page.locator('#processes .process.status-running');
    await row.waitFor();
    await row.locator('.process-output-toggle').click();
    const serving = await row.locator('.process-output', { hasText: 'Serving HTTP on 127.0.0.1 port' }).textContent();
    const port = /port (\d+)/.exec(serving)[1];
    // The list is read again after the output moved: the port is there by then.
    const link = row.locator('a.process-port');
    await link.waitFor();
    assert.equal(await link.textContent(), `127.0.0.1:${port}`);
    assert.equal(await link.getAttribute('href'), `http://127.0.0.1:${port}/`);
    assert.equal(await link.getAttribute('target'), '_blank');
    await checkAxe(page, 'a process with a port');
    await screenshot(page, 'processes-port');
    await row.locator('.process-stop').click();
    await page.locator('#processes .process.status-killed').waitFor();
    // An ended process listens on nothing.
    assert.equal(await page.locator('#processes a.process-port').count(), 0);
  }));
