// What the browser tests share: the real `openvaala` binary on port 0 with a fresh data
// directory, the fake OpenAI-chat provider of fakeprovider.js (scripted replies, paced streams,
// errors, tool calls, replies held until the test releases them), Debian's Chromium driven by
// playwright-core, axe-core checks, and screenshots. Every wait is on a selector or a condition
// with a timeout, never a fixed sleep.
// Any page error or console error fails a test (a test names the ones it expects).
//
// OPENVAALA_BIN names the binary (default ../../target/debug/openvaala); screenshots go to
// OPENVAALA_SCREENSHOTS (default <tmp>/openvaala-screenshots).
'use strict';

const assert = require('node:assert/strict');
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { chromium } = require('playwright-core');
const { startFakeProvider } = require('./fakeprovider');

const BIN = process.env.OPENVAALA_BIN
  ? path.resolve(process.env.OPENVAALA_BIN)
  : path.resolve(__dirname, '../../target/debug/openvaala');
const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = process.env.OPENVAALA_SCREENSHOTS || path.join(os.tmpdir(), 'openvaala-screenshots');
// How long one wait in the page may take; a test as a whole gets TEST_TIMEOUT.
const WAIT_MS = 20_000;
const TEST_TIMEOUT = 120_000;

// A configuration whose default agent (on the demo model) asks before each shell call.
const ASKS_FIRST = `
[agents.default]
description = "an agent whose shell calls ask first"
model = "demo"
[agents.default.permissions]
shell = "ask"
`;

const DESKTOP = { width: 1400, height: 900 };
const PHONE = { width: 420, height: 800 };

// ------------------------------------------------------------------------------------------------
// The server: `openvaala serve` with a fresh data directory, and no config unless the test gives
// one (HOME is a fresh directory too, so a developer's ~/.config/openvaala/config.toml is not read).

// The tests' own requests to a server (`fetch(`${server.base}/api/…`)`) carry its token, as
// any client of the API does.
const tokens = new Map();
const plainFetch = globalThis.fetch;
globalThis.fetch = (input, init = {}) => {
  const url = typeof input === 'string' ? input : input.url;
  const base = [...tokens.keys()].find((known) => url.startsWith(`${known}/`));
  if (!base) return plainFetch(input, init);
  const headers = new Headers(init.headers || {});
  if (!headers.has('authorization')) headers.set('authorization', `Bearer ${tokens.get(base)}`);
  return plainFetch(input, { ...init, headers });
};

async function startServer(root, options = {}) {
  const dataDir = path.join(root, 'data');
  const home = path.join(root, 'home');
  const cwd = path.join(root, 'work');
  for (const dir of [home, cwd]) fs.mkdirSync(dir, { recursive: true });
  const args = ['serve', '--addr', options.addr || '127.0.0.1:0', '--data-dir', dataDir];
  if (options.config) {
    const file = path.join(root, 'config.toml');
    fs.writeFileSync(file, options.config);
    args.push('--config', file);
  }
  const env = { ...process.env, HOME: home, OPENVAALA_LOG: 'info', NO_COLOR: '1' };
  for (const key of ['OPENVAALA_CONFIG', 'OPENVAALA_HOME', 'OPENVAALA_TOKEN']) delete env[key];
  const child = spawn(BIN, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = options.log || [];
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
  // The service's local token, which every API request carries: the page gets it through
  // the sign-in link (`openBase`), the tests' own requests through `fetch` below.
  const token = fs.readFileSync(path.join(dataDir, 'local-token'), 'utf8').trim();
  tokens.set(base, token);
  // The link a person signs in with, as `openvaala token url` prints it: it carries the web
  // UI's own token (derived from the local one), so the service records answers as the web's.
  const printed = execFileSync(BIN, ['token', '--data-dir', dataDir, 'url'], { encoding: 'utf8' }).trim();
  const signIn = `${base}/${new URL(printed).hash}`;
  const server = {
    base,
    token,
    signIn,
    pid: child.pid,
    root,
    cwd,
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
  return server;
}

// ------------------------------------------------------------------------------------------------
// One test = one server (+ a fake provider when asked) + one browser, all removed afterwards.
//
// options: { fake: true | { retry, agents }, viewport, colorScheme, hasTouch, allowConsole: [RegExp], config }
// (`hasTouch`: a touch screen, so the page matches `(pointer: coarse)`)
// (`agents`: the configuration's [agents.*] tables, see fakeprovider.js)
// The body gets { page, server, fake, context, restartServer, root, raisePriority, otherBrowser }
// (`otherBrowser()`: a page in a second browser, signed in to the same service).

async function withUi(options, body) {
  if (typeof options === 'function') {
    body = options;
    options = {};
  }
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'openvaala-ui-'));
  const log = [];
  let fake = null;
  let server = null;
  const cleanup = async () => {
    if (fake) await fake.close();
    fs.rmSync(root, { recursive: true, force: true });
  };
  try {
    if (options.fake) fake = await startFakeProvider();
    const config = fake ? fake.config(options.fake.retry, options.fake.agents) : options.config;
    server = await startServer(root, { config, log });
  } catch (error) {
    await cleanup();
    throw error;
  }
  const errors = [];
  const allowed = options.allowConsole || [];
  let context = null;
  let failure = null;
  let stopped = null;
  // Stops the service and starts it again on the same address with the same data (a restart).
  const restartServer = async (between) => {
    const result = await server.stop();
    assert.deepEqual(result, { code: 0, signal: null }, 'the server stops cleanly');
    if (between) await between();
    const addr = new URL(server.base).host;
    const config = fake ? fake.config(options.fake.retry, options.fake.agents) : options.config;
    server = await startServer(root, { config, log, addr });
    return server;
  };
  // Another browser (a profile of its own: its own storage), signed in like the first; closed
  // with the test.
  const others = [];
  const otherBrowser = async () => {
    const other = await launchBrowser(path.join(root, `profile-${others.length + 2}`), options);
    others.push(other);
    const otherPage = other.pages()[0] || (await other.newPage());
    otherPage.setDefaultTimeout(WAIT_MS);
    watchErrors(otherPage, 'other browser ');
    await otherPage.goto(server.signIn);
    return otherPage;
  };
  const watchErrors = (page, who) => {
    page.on('pageerror', (error) => errors.push(`${who}page error: ${error.stack || error.message}`));
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      const text = message.text();
      if (allowed.some((pattern) => pattern.test(text))) return;
      const where = message.location();
      errors.push(`${who}console error: ${text}${where && where.url ? ` (${where.url}:${where.lineNumber})` : ''}`);
    });
  };
  try {
    context = await launchBrowser(path.join(root, 'profile'), options);
    const page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(WAIT_MS);
    watchErrors(page, '');
    await page.goto(server.signIn);
    const raisePriority = () => raiseBrowserPriority(path.join(root, 'profile'), [server.pid, process.pid]);
    await body({ page, server: () => server, fake, context, restartServer, root, raisePriority, otherBrowser });
    assert.deepEqual(errors, [], 'the page logged errors');
  } catch (error) {
    failure = error;
  }
  for (const other of others) await other.close().catch((error) => (failure = failure || error));
  if (context) await context.close().catch((error) => (failure = failure || error));
  stopped = await server.stop().catch((error) => error);
  await cleanup();
  if (failure) {
    failure.message += `\n--- page errors ---\n${errors.join('\n') || '(none)'}\n--- server log ---\n${log.slice(-80).join('\n')}`;
    throw failure;
  }
  if (stopped instanceof Error) throw stopped;
  assert.deepEqual(stopped, { code: 0, signal: null }, `the server stops cleanly on SIGTERM:\n${log.join('\n')}`);
}

// Debian's Chromium, headless, with `profileDir` as its profile; `options` as withUi's.
function launchBrowser(profileDir, options) {
  return chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: options.viewport || DESKTOP,
    colorScheme: options.colorScheme || 'light',
    hasTouch: !!options.hasTouch,
    reducedMotion: 'reduce',
    permissions: ['clipboard-read', 'clipboard-write'],
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
}

// ------------------------------------------------------------------------------------------------
// What a user does.

// The landing page is the message box of a new conversation: the first message is typed and
// sent with Enter; resolves with the conversation id once the UI has opened it (#/c/<id>).
async function startConversation(page, text) {
  if (!/^#?\/?$|^#\/new$/.test(new URL(page.url()).hash)) await page.click('#new-conversation');
  await page.locator('#main[data-view="new"] #composer').waitFor();
  await page.fill('#message', text);
  await page.press('#message', 'Enter');
  await page.waitForURL(/#\/c\/[^/]+$/);
  return conversationId(page);
}

function conversationId(page) {
  return decodeURIComponent(new URL(page.url()).hash.slice('#/c/'.length));
}

// The conversation view says what it does in #main's data-state (view.js): "loading" until the
// conversation and its history are on the page, then "running" while the session shown works
// and "idle" when it does not.
function waitForViewState(page, value) {
  return page.locator(`#main[data-view="conversation"][data-state="${value}"]`).waitFor();
}

// Waits until the conversation is loaded and no turn runs in the session shown.
function waitIdle(page) {
  return waitForViewState(page, 'idle');
}

// Waits until the conversation is loaded and a turn runs in the session shown.
function waitRunning(page) {
  return waitForViewState(page, 'running');
}

// The demo's reply to `text`, complete, and the turn over.
async function waitForReply(page, text) {
  const reply = page.locator('#items .item.agent-message.status-completed', {
    hasText: `Demo model (offline, built in): you said "${text.split('\n')[0]}"`,
  });
  await reply.waitFor();
  await waitIdle(page);
  return reply;
}

async function sendMessage(page, text) {
  await page.fill('#message', text);
  await page.press('#message', 'Enter');
  return waitForReply(page, text);
}

// The texts of the timeline's messages, in order: what a user reads.
function messageTexts(page) {
  return page.locator('#items .item.user-message .text, #items .item.agent-message .md').allTextContents();
}

// The service's API, as another client (curl) would use it.
async function apiGet(server, apiPath) {
  const response = await fetch(`${server.base}${apiPath}`);
  assert.equal(response.status, 200, `GET ${apiPath}`);
  return response.json();
}

// ------------------------------------------------------------------------------------------------
// Timing measurements on a shared machine.

// Raises the scheduling priority of this test's browser (every process descended from the one
// using `profileDir`), of the service and of this process (the fake provider), so a timing
// measured in the page shows the page's own work, not other programs' builds competing for the
// CPU. Returns what it raised, or the reason it could not (only root, or a process with
// CAP_SYS_NICE, may raise a priority).
function raiseBrowserPriority(profileDir, others, priority = -10) {
  const parents = new Map();
  let browser = null;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(Number(entry), ppid);
      if (!browser && fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(`--user-data-dir=${profileDir}`)) browser = Number(entry);
    } catch {
      // The process ended meanwhile.
    }
  }
  if (browser === null) return 'no browser process found';
  const ours = new Set([browser]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, ppid] of parents) {
      if (!ours.has(pid) && ours.has(ppid)) {
        ours.add(pid);
        grew = true;
      }
    }
  }
  // A priority belongs to a thread: every thread of every process is raised (the compositor and
  // the network threads matter as much as the main thread).
  let threads = 0;
  try {
    for (const pid of [...ours, ...others]) {
      for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
        try {
          os.setPriority(Number(tid), priority);
          threads++;
        } catch (error) {
          if (error.code !== 'ESRCH') throw error;
        }
      }
    }
  } catch (error) {
    return `not raised: ${error.code || error.message}`;
  }
  // With autogroup scheduling (Linux's default on desktops and many servers) a nice value only
  // counts within the process's session, and the browser runs in a session of its own: that
  // session's weight is raised too.
  let group = '';
  try {
    fs.writeFileSync(`/proc/${browser}/autogroup`, String(priority));
    group = ', and its scheduling group';
  } catch {
    group = '';
  }
  return `raised ${threads} threads of ${ours.size + others.length} processes${group} to ${priority}`;
}

// ------------------------------------------------------------------------------------------------
// Accessibility and looks.

const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

// Runs axe-core in the page (through the debugging protocol, which the page's CSP does not
// govern) and fails on any finding, whatever its impact.
async function checkAxe(page, label) {
  if (!(await page.evaluate(() => !!window.axe))) await page.evaluate(AXE_SOURCE);
  const results = await page.evaluate(async () => {
    const run = await window.axe.run(document, { resultTypes: ['violations'] });
    return run.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => `${n.target.join(' ')} — ${n.failureSummary}`),
    }));
  });
  assert.deepEqual(results, [], `axe-core found problems (${label})`);
}

// Runs `body(size, scheme)` in each view people use: 1400×900 ('desktop') and 420×800
// ('phone'), each in light and dark.
async function inEachView(page, body) {
  for (const [size, viewport] of [
    ['desktop', DESKTOP],
    ['phone', PHONE],
  ]) {
    await page.setViewportSize(viewport);
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      await body(size, scheme);
    }
  }
}

async function screenshot(page, name) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path: file });
  return file;
}

// Makes the page look hidden (another tab, a locked phone) or visible again, as the browser
// reports it to the page's visibility listeners.
function setHidden(page, hidden) {
  return page.evaluate((hide) => {
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => hide });
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (hide ? 'hidden' : 'visible') });
    document.dispatchEvent(new Event('visibilitychange'));
  }, hidden);
}

module.exports = {
  ASKS_FIRST,
  BIN,
  DESKTOP,
  PHONE,
  TEST_TIMEOUT,
  WAIT_MS,
  apiGet,
  checkAxe,
  conversationId,
  inEachView,
  launchBrowser,
  messageTexts,
  screenshot,
  sendMessage,
  setHidden,
  startConversation,
  waitForReply,
  waitIdle,
  waitRunning,
  withUi,
};
