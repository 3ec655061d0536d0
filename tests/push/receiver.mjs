// A stand-in push service for the Web Push tests (tests/it/push_send.rs), playing the browser's
// part too: it makes a subscription, then checks and decrypts what is POSTed to it.
//
// At start it prints the subscription as one JSON line on stdout, as a browser's
// `PushSubscription.toJSON()` gives it:
//   {"endpoint":"http://127.0.0.1:PORT/push/<id>","keys":{"p256dh":"…","auth":"…"}}
// Then, for each POST to /push/*, it prints one JSON line:
//   {"ok":true,"path":…,"status":…,"payload":"<decrypted text>","ttl":…,"urgency":…,"rs":…,"idlen":…}
// or {"ok":false,"path":…,"status":400,"error":"…"} when a check fails. The checks: the
// `Authorization: vapid t=<JWT>, k=<key>` header (RFC 8292: an ES256 JWT whose signature
// verifies with the `k=` key, `aud` this receiver's origin, `exp` in the future and at most
// 24 hours away, `sub` a mailto: or https: URL), the `Content-Encoding: aes128gcm`,
// `Content-Type` and `TTL` headers, and the body, decrypted with this subscription's private
// key and auth secret by http_ece (RFC 8188 / RFC 8291). It answers 201, or 400 when a check
// fails.
//
// `--answer PATH=STATUS[,RETRY_AFTER]` (repeatable) makes it answer STATUS for POSTs to PATH
// after the same checks (410 for a subscription that is gone, 503 with a `Retry-After` for a
// busy service; a 3xx goes with a `Location` pointing at the subscription's own path).
// It exits when its standard input closes.
import crypto from "node:crypto";
import http from "node:http";
import ece from "http_ece";

const MOST_BODY_BYTES = 64 * 1024;
const DAY_S = 24 * 60 * 60;

const answers = new Map();
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const match = args[i] === "--answer" && /^(\/[^=]*)=(\d{3})(?:,(\d+))?$/.exec(args[i + 1] ?? "");
  if (!match) {
    console.error(`usage: receiver.mjs [--answer PATH=STATUS[,RETRY_AFTER]]…; got ${args[i]}`);
    process.exit(2);
  }
  answers.set(match[1], { status: Number(match[2]), retryAfter: match[3] });
  i++;
}

const receiverKey = crypto.createECDH("prime256v1");
receiverKey.generateKeys();
const authSecret = crypto.randomBytes(16);
const id = crypto.randomBytes(8).toString("hex");
const ownPath = `/push/${id}`;

function print(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

class Refused extends Error {}

function check(condition, error) {
  if (!condition) {
    throw new Refused(error);
  }
}

function jsonPart(part, name) {
  try {
    return JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
  } catch {
    throw new Refused(`the JWT's ${name} is not base64url JSON`);
  }
}

// RFC 8292 §2 and §3: the token, its signature with the named key, and its claims.
function checkVapid(authorization, origin) {
  const match = /^vapid t=([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+), k=([A-Za-z0-9_-]+)$/.exec(
    authorization ?? "",
  );
  check(match, `Authorization is not "vapid t=<JWT>, k=<key>": ${JSON.stringify(authorization)}`);
  const [token, k] = [match[1], match[2]];
  const point = Buffer.from(k, "base64url");
  check(point.length === 65 && point[0] === 4, "k= is not an uncompressed P-256 point");
  const publicKey = crypto.createPublicKey({
    format: "jwk",
    key: {
      kty: "EC",
      crv: "P-256",
      x: point.subarray(1, 33).toString("base64url"),
      y: point.subarray(33).toString("base64url"),
    },
  });
  const [header, claims, signature] = token.split(".");
  const head = jsonPart(header, "header");
  check(head.typ === "JWT" && head.alg === "ES256", `JWT header ${JSON.stringify(head)}`);
  const verified = crypto.verify(
    "sha256",
    Buffer.from(`${header}.${claims}`),
    { key: publicKey, dsaEncoding: "ieee-p1363" },
    Buffer.from(signature, "base64url"),
  );
  check(verified, "the JWT's signature does not verify with the k= key");
  const claimed = jsonPart(claims, "claims");
  check(claimed.aud === origin, `aud ${JSON.stringify(claimed.aud)} is not ${origin}`);
  const now = Math.floor(Date.now() / 1000);
  check(Number.isInteger(claimed.exp), `exp ${JSON.stringify(claimed.exp)} is not a time`);
  check(claimed.exp > now, `exp ${claimed.exp} is past (now ${now})`);
  check(claimed.exp <= now + DAY_S, `exp ${claimed.exp} is more than 24 hours away`);
  check(
    typeof claimed.sub === "string" && /^(mailto:|https:\/\/)/.test(claimed.sub),
    `sub ${JSON.stringify(claimed.sub)} is not a mailto: or https: URL`,
  );
}

function checkMessage(request, body, origin) {
  checkVapid(request.headers.authorization, origin);
  const encoding = request.headers["content-encoding"];
  check(encoding === "aes128gcm", `Content-Encoding is ${JSON.stringify(encoding)}`);
  const type = request.headers["content-type"];
  check(type === "application/octet-stream", `Content-Type is ${JSON.stringify(type)}`);
  const ttl = request.headers.ttl;
  check(/^\d+$/.test(ttl ?? ""), `TTL is ${JSON.stringify(ttl)}`);
  const urgency = request.headers.urgency ?? null;
  check(
    urgency === null || ["very-low", "low", "normal", "high"].includes(urgency),
    `Urgency is ${JSON.stringify(urgency)}`,
  );
  check(body.length > 21, `the body has ${body.length} bytes, less than a header`);
  const rs = body.readUInt32BE(16);
  const idlen = body[20];
  let plaintext;
  try {
    plaintext = ece.decrypt(body, {
      version: "aes128gcm",
      privateKey: receiverKey,
      authSecret: authSecret.toString("base64url"),
    });
  } catch (error) {
    throw new Refused(`not decrypted: ${error.message}`);
  }
  return { payload: plaintext.toString("utf8"), ttl: Number(ttl), urgency, rs, idlen };
}

const server = http.createServer((request, response) => {
  const chunks = [];
  let size = 0;
  request.on("data", (chunk) => {
    size += chunk.length;
    if (size <= MOST_BODY_BYTES) {
      chunks.push(chunk);
    }
  });
  request.on("end", () => {
    const path = request.url;
    if (request.method !== "POST" || !path.startsWith("/push/")) {
      response.writeHead(404).end();
      return;
    }
    const origin = `http://127.0.0.1:${server.address().port}`;
    let line;
    try {
      check(size <= MOST_BODY_BYTES, `the body has ${size} bytes`);
      line = { ok: true, path, ...checkMessage(request, Buffer.concat(chunks), origin) };
    } catch (error) {
      if (!(error instanceof Refused)) {
        throw error;
      }
      line = { ok: false, path, error: error.message };
    }
    const answer = answers.get(path);
    const status = answer?.status ?? (line.ok ? 201 : 400);
    const headers = {};
    if (answer?.retryAfter !== undefined) {
      headers["retry-after"] = answer.retryAfter;
    }
    if (status >= 300 && status < 400) {
      headers.location = ownPath;
    }
    print({ ...line, status });
    response.writeHead(status, headers).end(line.ok ? "" : line.error);
  });
});

server.listen(0, "127.0.0.1", () => {
  const { port } = server.address();
  print({
    endpoint: `http://127.0.0.1:${port}${ownPath}`,
    keys: {
      p256dh: receiverKey.getPublicKey("base64url"),
      auth: authSecret.toString("base64url"),
    },
  });
});

process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
