// An ACP client built on the SDK's `client()` API, driven by the end-to-end tests
// (tests/it/acp.rs) over a line protocol: it spawns the agent command given in argv and
// reads one JSON command a line on stdin:
//   {"id": n, "request": method, "params": {…}}   → {"id": n, "result": …} or {"id": n, "error": …}
//   {"notify": method, "params": {…}}
//   {"answer": k, "outcome": {…}}                  answers permission request k
//   {"answer": k, "response": {…}}                 answers form request k
// and writes, one JSON a line on stdout, every session/update ({"update": notification}),
// every permission request ({"permission": k, "params": …}), every form the agent asks to fill
// in ({"form": k, "params": …}) and the end of one the agent withdrew ({"withdrawn": k}).
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { Readable, Writable } from "node:stream";
// The SDK's unstable entry: the same client, with the unstable parts of the protocol (the
// sub-agent extension) in its schemas.
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk/unstable";

const [command, ...args] = process.argv.slice(2);
const agent = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");

const asked = new Map();
let nextAsk = 0;

// Waits for the test's answer to request k; withdrawn by the agent, it ends `withdrawn`.
const waitForAnswer = (k, signal, withdrawnAnswer) =>
  new Promise((resolve) => {
    asked.set(k, resolve);
    signal.addEventListener("abort", () => {
      if (asked.delete(k)) {
        out({ withdrawn: k });
        resolve(withdrawnAnswer);
      }
    });
  });

const app = client({ name: "openvaala-acp-tests" })
  .onNotification(methods.client.session.update, ({ params }) => {
    out({ update: params });
  })
  .onRequest(methods.client.session.requestPermission, ({ params, signal }) => {
    const k = nextAsk++;
    const answered = waitForAnswer(k, signal, { outcome: { outcome: "cancelled" } });
    out({ permission: k, params });
    return answered.then((outcome) => ({ outcome }));
  })
  .onRequest(methods.client.elicitation.create, ({ params, signal }) => {
    const k = nextAsk++;
    const answered = waitForAnswer(k, signal, { action: "cancel" });
    out({ form: k, params });
    return answered;
  });

await app.connectWith(stream, async (ctx) => {
  const lines = createInterface({ input: process.stdin });
  const running = [];
  for await (const line of lines) {
    const message = JSON.parse(line);
    if (message.request) {
      running.push(
        ctx.request(message.request, message.params).then(
          (result) => out({ id: message.id, result: result ?? null }),
          (error) => out({ id: message.id, error: { code: error.code, message: error.message } }),
        ),
      );
    } else if (message.notify) {
      await ctx.notify(message.notify, message.params);
    } else if (message.answer !== undefined) {
      const resolve = asked.get(message.answer);
      asked.delete(message.answer);
      resolve?.(message.response ?? message.outcome);
    }
  }
  await Promise.allSettled(running);
});
agent.kill();
