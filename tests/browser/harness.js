// What the browser tests share: the real `openvaala` binary on port 0 with a fresh data
// directory, a fake OpenAI-chat provider written here in Node (scripted replies, paced streams,
// errors, tool calls), Debian's Chromium driven by playwright-core, axe-core checks, and
// screenshots. Every wait is on a selector or a condition with a timeout, never a fixed sleep.
// Any page error or console error fails a test (a test names the ones it expects).
//
// OPENVAALA_BIN names the binary (default ../../target/debug/openvaala); screenshots go to
// OPENVAALA_SCREENSHOTS (default <tmp>/openvaala-screenshots).
'use strict';

const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { once } = require('node:events');
const { chromium } = require('playwright-core');

const BIN = process.env.OPENVAALA_BIN
  ? path.resolve(process.env.OPENVAALA_BIN)
  : path.resolve(__dirname, '../../target/debug/openvaala');
const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = process.env.OPENVAALA_SCREENSHOTS || path.join(os.tmpdir(), 'openvaala-screenshots');
// How long one wait in the page may take; a test as a whole gets TEST_TIMEOUT.
const WAIT_MS = 20_000;
const TEST_TIMEOUT = 120_000;

const DESKTOP = { width: 1400, height: 900 };
const PHONE = { width: 420, height: 800 };

// ------------------------------------------------------------------------------------------------
// The server: `openvaala serve` with a fresh data directory, and no config unless the test gives
// one (HOME is a fresh directory too, so a developer's ~/.config/openvaala/config.toml is not read).

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
  const server = {
    base,
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
// The fake provider: OpenAI chat completions, streamed as the real API does. Replies come from a
// queue the test fills; with the queue empty it answers "Echo: <the last user message>".
//
// A reply is one of:
//   { text, chunkChars?, paceMs? }      a streamed answer (5 characters a chunk, 1 ms apart)
//   { tokens: [...], msPerToken }       each token one chunk, at that pace on average
//   { tool: name, args }                one tool call
//   { status, message }                 an HTTP error in OpenAI's error shape
//   { waitFor: promise, then: reply }   holds the request until the promise settles
// or a function of the request body giving one of these.

const MODEL_NAME = 'fake-model';

async function startFakeProvider() {
  const replies = [];
  const requests = [];
  const sockets = new Set();
  let number = 0;
  const server = http.createServer(async (request, response) => {
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    let body = null;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = null;
    }
    requests.push({ url: request.url, body });
    if (request.url !== '/v1/chat/completions') {
      sendError(response, 404, `no route for ${request.url}`);
      return;
    }
    let reply = replies.length ? replies.shift() : { text: `Echo: ${lastUserText(body)}` };
    if (typeof reply === 'function') reply = reply(body);
    while (reply.waitFor) {
      await reply.waitFor;
      reply = typeof reply.then === 'function' ? reply.then(body) : reply.then;
    }
    const id = `chatcmpl-${++number}`;
    try {
      await answer(response, id, reply);
    } catch {
      // The service went away mid-stream (an interrupt or a stop): nothing more to send.
      response.destroy();
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    push(...items) {
      replies.push(...items);
    },
    remaining: () => replies.length,
    config(retry = {}) {
      return `
[retry]
max_attempts = 10
initial_delay_ms = ${retry.initialDelayMs || 10}
max_delay_ms = ${retry.maxDelayMs || 50}

[providers.fake]
protocol = "openai_chat"
base_url = "http://127.0.0.1:${port}/v1"

[models.m]
provider = "fake"
name = "${MODEL_NAME}"
context_window = 100000
max_output_tokens = 1000

[agents.default]
description = "test agent"
model = "m"
tools = ["shell", "read_file", "write_file", "list_dir"]
`;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

function lastUserText(body) {
  const messages = (body && body.messages) || [];
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === 'user') {
      const content = messages[i].content;
      return typeof content === 'string' ? content : (content || []).map((part) => part.text || '').join('');
    }
  }
  return '';
}

function chunk(id, delta, finishReason) {
  const data = {
    id,
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: MODEL_NAME,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason || null }],
  };
  return `data: ${JSON.stringify(data)}\n\n`;
}

function ending(id, finishReason) {
  const usage = {
    id,
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: MODEL_NAME,
    choices: [],
    usage: { prompt_tokens: 321, completion_tokens: 12, total_tokens: 333 },
  };
  return `${chunk(id, {}, finishReason)}data: ${JSON.stringify(usage)}\n\ndata: [DONE]\n\n`;
}

function sendError(response, status, message) {
  const type = status === 429 ? 'rate_limit_error' : status >= 500 ? 'api_error' : 'invalid_request_error';
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify({ error: { message, type, param: null, code: null } }));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function write(response, text) {
  if (!response.write(text)) await once(response, 'drain');
}

async function answer(response, id, reply) {
  if (reply.status) {
    sendError(response, reply.status, reply.message || `fake provider failure ${reply.status}`);
    return;
  }
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  if (reply.tool) {
    const callId = `call_${id}`;
    await write(
      response,
      chunk(id, { role: 'assistant', content: null, tool_calls: [{ index: 0, id: callId, type: 'function', function: { name: reply.tool, arguments: '' } }] }),
    );
    await write(response, chunk(id, { tool_calls: [{ index: 0, function: { arguments: JSON.stringify(reply.args || {}) } }] }));
    await write(response, ending(id, 'tool_calls'));
    response.end();
    return;
  }
  await write(response, chunk(id, { role: 'assistant', content: '' }));
  if (reply.tokens) {
    // Each token is due at its time; tokens that fell due together go out in one write, as a
    // provider's would after a pause.
    const start = performance.now();
    let sent = 0;
    while (sent < reply.tokens.length) {
      const due = Math.min(reply.tokens.length, Math.floor((performance.now() - start) / reply.msPerToken) + 1);
      let batch = '';
      while (sent < due) batch += chunk(id, { content: reply.tokens[sent++] });
      await write(response, batch);
      await sleep(reply.msPerToken);
    }
  } else {
    const size = reply.chunkChars || 5;
    const text = [...(reply.text || '')];
    for (let i = 0; i < text.length; i += size) {
      await write(response, chunk(id, { content: text.slice(i, i + size).join('') }));
      await sleep(reply.paceMs === undefined ? 1 : reply.paceMs);
    }
  }
  await write(response, ending(id, 'stop'));
  response.end();
}

// ------------------------------------------------------------------------------------------------
// One test = one server (+ a fake provider when asked) + one browser, all removed afterwards.
//
// options: { fake: true | { retry }, viewport, colorScheme, allowConsole: [RegExp], demoConfig }
// The body gets { page, server, fake, context, restartServer }.

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
    const config = fake ? fake.config(options.fake.retry) : options.config;
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
    const config = fake ? fake.config(options.fake.retry) : options.config;
    server = await startServer(root, { config, log, addr });
    return server;
  };
  try {
    context = await chromium.launchPersistentContext(path.join(root, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      viewport: options.viewport || DESKTOP,
      colorScheme: options.colorScheme || 'light',
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
    const page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(WAIT_MS);
    page.on('pageerror', (error) => errors.push(`page error: ${error.stack || error.message}`));
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      const text = message.text();
      if (allowed.some((pattern) => pattern.test(text))) return;
      const where = message.location();
      errors.push(`console error: ${text}${where && where.url ? ` (${where.url}:${where.lineNumber})` : ''}`);
    });
    await page.goto(`${server.base}/`);
    const raisePriority = () => raiseBrowserPriority(path.join(root, 'profile'), [server.pid, process.pid]);
    await body({ page, server: () => server, fake, context, restartServer, root, raisePriority });
    assert.deepEqual(errors, [], 'the page logged errors');
  } catch (error) {
    failure = error;
  }
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

// ------------------------------------------------------------------------------------------------
// What a user does.

// The landing page is the message box of a new conversation: the first message is typed and
// sent with Enter; resolves with the conversation id once the UI has opened it (#/c/<id>).
async function startConversation(page, text) {
  if (!/^#?\/?$|^#\/new$/.test(new URL(page.url()).hash)) await page.click('#new-conversation');
  await page.locator('#composer').waitFor();
  await page.waitForFunction(() => document.getElementById('send').textContent === 'Start');
  await page.fill('#message', text);
  await page.press('#message', 'Enter');
  await page.waitForURL(/#\/c\/[^/]+$/);
  return conversationId(page);
}

function conversationId(page) {
  return decodeURIComponent(new URL(page.url()).hash.slice('#/c/'.length));
}

// Waits until the turn is over: the conversation is loaded (while it loads, the page knows
// nothing of its turn, and looks idle) and the composer no longer says the agent is working.
async function waitIdle(page) {
  await page.waitForFunction(
    () =>
      document.getElementById('conversation-title').textContent !== 'Loading…' &&
      ![...document.querySelectorAll('#items > p.loading')].some((p) => p.textContent === 'Loading history…') &&
      document.getElementById('running-indicator').hidden &&
      document.getElementById('send').textContent === 'Send',
  );
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
// govern) and fails on any serious or critical finding. Returns every finding, for the report.
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
  const serious = results.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(serious, [], `axe-core found serious or critical problems (${label})`);
  return results;
}

async function screenshot(page, name) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path: file });
  return file;
}

module.exports = {
  DESKTOP,
  PHONE,
  TEST_TIMEOUT,
  WAIT_MS,
  apiGet,
  checkAxe,
  conversationId,
  messageTexts,
  screenshot,
  sendMessage,
  startConversation,
  waitForReply,
  waitIdle,
  withUi,
};
