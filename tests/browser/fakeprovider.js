// The browser tests' fake model provider: OpenAI chat completions, streamed as the real API
// does, served from Node. Replies come from a queue the test fills; with the queue empty it
// answers "Echo: <the last user message>". Its model is `m` in the configuration it gives.
//
// A reply is one of:
//   { text, chunkChars?, paceMs? }      a streamed answer (5 characters a chunk, 1 ms apart)
//   { tokens: [...], msPerToken }       each token one chunk, at that pace on average
//   { tool: name, args }                one tool call
//   { status, message }                 an HTTP error in OpenAI's error shape
//   { waitFor: promise, then: reply }   holds the request until the promise settles
// or a function of the request body giving one of these.
//
// `hold(reply)` queues a reply that is held back until the test lets it go, and returns its gate.
// While the call is held the turn is certainly running, so a test acts "while the agent works"
// without betting on how long something takes:
//   await gate.requested      the model call has arrived (resolves with the request's body)
//   await gate.write(text)    while held, streams a piece of text at once: the answer has begun
//   gate.release()            the reply goes out (after what was written), and the call ends
// A held call that the service gives up (an interrupt, a stop) just ends.
'use strict';

const http = require('node:http');
const { once } = require('node:events');

const MODEL_NAME = 'fake-model';

// The agents of the configuration unless a test gives its own: one agent on the fake model.
const DEFAULT_AGENTS = `
[agents.default]
description = "test agent"
model = "m"
tools = ["shell", "read_file", "write_file", "list_dir"]
`;

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
      if (reply.serveHeld) await reply.serveHeld(response, id, body);
      else await answer(response, id, reply);
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
    hold(reply) {
      const { gate, queued } = heldReply(reply);
      replies.push(queued);
      return gate;
    },
    // A held reply not queued: `queued` is for a function reply to give (see above).
    held: heldReply,
    remaining: () => replies.length,
    // `agents`: the [agents.*] tables (TOML); the fake's model is `m`, the built-in one `demo`.
    config(retry = {}, agents = DEFAULT_AGENTS) {
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
${agents}`;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

// A reply held until its gate is released: the gate for the test, the queue entry for the
// provider.
function heldReply(reply) {
  let release;
  const released = new Promise((resolve) => (release = resolve));
  let arrive;
  const arrived = new Promise((resolve) => (arrive = resolve));
  const gate = {
    requested: arrived.then((call) => call.body),
    release() {
      release();
    },
    async write(text) {
      const call = await arrived;
      if (call.response.destroyed) throw new Error('the held model call was already ended by the service');
      await begin(call.response, call.id, call);
      await write(call.response, chunk(call.id, { content: text }));
    },
  };
  const queued = {
    async serveHeld(response, id, body) {
      const call = { response, id, body, begun: false };
      const gone = new Promise((resolve) => response.once('close', resolve));
      arrive(call);
      await Promise.race([released, gone]);
      if (response.destroyed || response.writableEnded) return;
      await answer(response, id, reply, call);
    },
  };
  return { gate, queued };
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
    // Most of what a call reads, the provider's prompt cache served.
    usage: { prompt_tokens: 321, prompt_tokens_details: { cached_tokens: 256 }, completion_tokens: 12, total_tokens: 333 },
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

// The streamed answer's headers and first chunk, once (`call.begun` records it).
async function begin(response, id, call) {
  if (call.begun) return;
  call.begun = true;
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  await write(response, chunk(id, { role: 'assistant', content: '' }));
}

// `call`: a held call whose answer may have begun already.
async function answer(response, id, reply, call = { begun: false }) {
  if (reply.status) {
    if (call.begun) throw new Error('an error status cannot follow text already streamed');
    sendError(response, reply.status, reply.message || `fake provider failure ${reply.status}`);
    return;
  }
  if (reply.tool) {
    if (!call.begun) response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
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
  await begin(response, id, call);
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

module.exports = { startFakeProvider };
