// Browser tests of the web UI: the real `openvaala` binary (built-in offline `demo` model, fresh
// data directory) driven in Debian's Chromium by playwright-core, like a user would. Every wait
// is on a selector or a condition with a timeout, never a fixed sleep. Any page error or console
// error fails the test.
//
// Run with `node --test` from this directory (scripts/test does it after building the binary);
// OPENVAALA_BIN names the binary, default ../../target/debug/openvaala.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { chromium } = require('playwright-core');

const BIN = process.env.OPENVAALA_BIN
  ? path.resolve(process.env.OPENVAALA_BIN)
  : path.resolve(__dirname, '../../target/debug/openvaala');
const CHROMIUM = '/usr/bin/chromium';
// How long one wait in the page may take; a test as a whole gets TEST_TIMEOUT.
const WAIT_MS = 15_000;
const TEST_TIMEOUT = 90_000;

// ------------------------------------------------------------------------------------------------
// The server: `openvaala serve` on port 0 with a fresh data directory and no config (HOME is a
// fresh directory too, so a developer's ~/.config/openvaala/config.toml is not read).

async function startServer(root) {
  const dataDir = path.join(root, 'data');
  const home = path.join(root, 'home');
  const cwd = path.join(root, 'work');
  for (const dir of [home, cwd]) fs.mkdirSync(dir, { recursive: true });
  const env = { ...process.env, HOME: home, OPENVAALA_LOG: 'info', NO_COLOR: '1' };
  for (const key of ['OPENVAALA_CONFIG', 'OPENVAALA_HOME', 'OPENVAALA_TOKEN']) delete env[key];
  const child = spawn(BIN, ['serve', '--addr', '127.0.0.1:0', '--data-dir', dataDir], {
    cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = [];
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the server did not start in ${WAIT_MS} ms:\n${log.join('\n')}`));
    }, WAIT_MS);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${BIN}: ${error.message} (build it with \`cargo build\`, or set OPENVAALA_BIN)`));
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`the server exited before serving (code ${code}, signal ${signal}):\n${log.join('\n')}`));
    });
    // "openvaala is serving on http://127.0.0.1:PORT" (main.rs writes it to stderr; read both).
    for (const stream of [child.stdout, child.stderr]) {
      readline.createInterface({ input: stream }).on('line', (line) => {
        log.push(line);
        const match = /openvaala is serving on (http:\/\/\S+)/.exec(line);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      });
    }
  });
  return {
    base,
    log,
    // SIGTERM is the graceful stop; a clean stop exits 0.
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timeout = new Promise((resolve) => setTimeout(() => resolve(null), WAIT_MS).unref());
      const result = await Promise.race([exited, timeout]);
      if (result === null) {
        child.kill('SIGKILL');
        await exited;
        throw new Error(`the server did not stop within ${WAIT_MS} ms of SIGTERM:\n${log.join('\n')}`);
      }
      return result;
    },
  };
}

// ------------------------------------------------------------------------------------------------
// One test = one server + one browser, each with fresh directories, all removed afterwards.

async function withUi(body) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'openvaala-ui-'));
  let server;
  try {
    server = await startServer(root);
  } catch (error) {
    fs.rmSync(root, { recursive: true, force: true });
    throw error;
  }
  const errors = [];
  let context = null;
  let failure = null;
  try {
    context = await chromium.launchPersistentContext(path.join(root, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(WAIT_MS);
    page.on('pageerror', (error) => errors.push(`page error: ${error.stack || error.message}`));
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      const where = message.location();
      errors.push(`console error: ${message.text()}${where && where.url ? ` (${where.url}:${where.lineNumber})` : ''}`);
    });
    await page.goto(`${server.base}/`);
    await body({ page });
    assert.deepEqual(errors, [], 'the page logged errors');
  } catch (error) {
    failure = error;
  }
  if (context) await context.close().catch((error) => (failure = failure || error));
  const stopped = await server.stop().catch((error) => error);
  fs.rmSync(root, { recursive: true, force: true });
  if (failure) {
    failure.message += `\n--- page errors ---\n${errors.join('\n') || '(none)'}\n--- server log ---\n${server.log.join('\n')}`;
    throw failure;
  }
  if (stopped instanceof Error) throw stopped;
  assert.deepEqual(stopped, { code: 0, signal: null }, `the server stops cleanly on SIGTERM:\n${server.log.join('\n')}`);
}

// ------------------------------------------------------------------------------------------------
// What a user does.

// "+ New conversation", then the first message sent with Enter; resolves with the conversation id
// once the UI has opened it (#/c/<id>).
async function startConversation(page, text) {
  await page.click('#new-conversation');
  await page.locator('#composer').waitFor();
  await page.fill('#message', text);
  await page.press('#message', 'Enter');
  await page.waitForURL(/#\/c\/[^/]+$/);
  return decodeURIComponent(new URL(page.url()).hash.slice('#/c/'.length));
}

// Waits until the open conversation's turn is over: the demo's reply to `text` is complete and
// the composer no longer says the agent is working.
async function waitForReply(page, text) {
  const reply = page.locator('#items .item.agent-message.status-completed', {
    hasText: `Demo model (offline, built in): you said "${text}"`,
  });
  await reply.waitFor();
  await page.waitForFunction(
    () => document.getElementById('running-indicator').hidden && document.getElementById('send').textContent === 'Send',
  );
  return reply;
}

async function sendMessage(page, text) {
  await page.fill('#message', text);
  await page.press('#message', 'Enter');
  return waitForReply(page, text);
}

// The texts of the timeline's messages, in order: what a user reads.
function messageTexts(page) {
  return page.locator('#items .item.user-message .text, #items .item.agent-message .text').allTextContents();
}

// ------------------------------------------------------------------------------------------------

test('a first message gets the demo reply and the conversation is listed under its title', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await page.locator('#welcome').waitFor();
    const id = await startConversation(page, 'Hello from the browser');

    await page.locator('#items .item.user-message .text', { hasText: 'Hello from the browser' }).waitFor();
    await waitForReply(page, 'Hello from the browser');
    assert.equal(await page.textContent('#conversation-title'), 'Hello from the browser');

    const row = page.locator('#conversation-list li.conv.selected');
    await row.locator('.conv-title', { hasText: 'Hello from the browser' }).waitFor();
    assert.equal(await row.locator('a.conv-link').getAttribute('href'), `#/c/${encodeURIComponent(id)}`);
    assert.equal(await page.locator('#conversation-list li.conv').count(), 1);
  }));

test('/shell runs the shell tool and shows its output and exit code', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await startConversation(page, '/shell echo browser-test-output');

    const tool = page.locator('#items .item.tool-call', { hasText: 'Tool: shell' });
    await tool.locator('.arguments', { hasText: '$ echo browser-test-output' }).waitFor();
    await tool.locator('.output', { hasText: 'browser-test-output' }).waitFor();
    await tool.locator('.badge.exit.ok', { hasText: 'exit 0' }).waitFor();
    const reply = await waitForReply(page, '/shell echo browser-test-output');
    assert.match(await reply.textContent(), /The shell tool returned \d+ bytes \(exit code 0\)\./);
  }));

test('"Compress context" adds a summary and marks the earlier turn compacted', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await startConversation(page, 'first question');
    await waitForReply(page, 'first question');
    await sendMessage(page, 'second question');

    await page.click('#compact');
    const summary = page.locator('#items details.item.summary');
    await summary.locator('summary', { hasText: 'Context summary' }).waitFor();
    // "Compressing the context (manual)…" is shown only while it runs.
    await page.locator('#items .line.compaction').waitFor({ state: 'detached' });

    // In a short history only the last turn stays outside the summary.
    const checkBadges = async () => {
      const messages = page.locator('#items .item.user-message, #items .item.agent-message');
      await messages.nth(3).waitFor();
      assert.equal(await messages.count(), 4);
      for (const [index, compacted] of [true, true, false, false].entries()) {
        const item = messages.nth(index);
        const text = await item.locator('.text').textContent();
        assert.equal(text.includes('first question'), compacted, `item ${index}: ${text}`);
        assert.equal(await item.locator('.badge.compacted').count(), compacted ? 1 : 0, `item ${index}: ${text}`);
      }
      assert.equal(await summary.count(), 1);
      assert.equal(await summary.locator('.badge.compacted').count(), 0);
    };
    await checkBadges();

    // The same after a reload, from the stored history.
    await page.reload();
    await summary.locator('summary', { hasText: 'Context summary' }).waitFor();
    await checkBadges();
  }));

test('a message sent while the agent works waits with its actions; the Agents tab and the sidebar follow the turn', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page }) => {
    await startConversation(page, 'busy for a while\n/sleep 150');
    await page.locator('#running-indicator').waitFor({ state: 'visible' });
    await page.fill('#message', 'wait for me');
    await page.press('#message', 'Enter');
    const waiting = page.locator('#pending-list li.pending-item', { hasText: 'wait for me' });
    await waiting.locator('button', { hasText: 'Interrupt with this' }).waitFor();
    const actions = await waiting.locator('button').allTextContents();
    assert.deepEqual(actions, ['Edit', 'Withdraw', 'Interrupt with this']);
    assert.ok(!(await waiting.textContent()).includes('null'), await waiting.textContent());

    await page.click('#tab-agents');
    const main = page.locator('#agents li.agent-row', { hasText: 'main agent' });
    await main.locator('.badge', { hasText: 'running' }).waitFor();
    // The waiting message is answered (by this turn or the next); then the main agent is idle and
    // shows its last answer, without a reload.
    await main.locator('.badge', { hasText: 'idle' }).waitFor();
    await main.getByText('you said "wait for me"', { exact: false }).waitFor();
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
    await page.locator('#conversation-meta a', { hasText: 'forked from' }).waitFor();
    await page.locator('#conversation-title', { hasText: 'fork me (fork)' }).waitFor();
    await page.locator('#items .item.agent-message', { hasText: 'and this too' }).waitFor();
    assert.deepEqual(await messageTexts(page), before);

    // Both are listed, the fork selected.
    await page.locator('#conversation-list li.conv.selected .conv-title', { hasText: 'fork me (fork)' }).waitFor();
    await page.locator('#conversation-list li.conv').nth(1).waitFor();
    assert.equal(await page.locator('#conversation-list li.conv').count(), 2);
  }));
