// The client against a real `turnd serve` (the embedded store, the demo
// tools), started by the test on a free loopback port. The binary is
// $TURND_BIN, else bin/turnd at the repository's root, else built here.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

import { Client, TurndError, newTurnId } from "../dist/index.js";

const root = resolve(import.meta.dirname, "../../..");
const dir = mkdtempSync(join(tmpdir(), "turnd-ts-"));
let bin = process.env.TURND_BIN || join(root, "bin/turnd");
const servers = [];

before(() => {
  if (!existsSync(bin)) {
    bin = join(dir, "turnd");
    execFileSync("go", ["build", "-o", bin, "./cmd/turnd"], { cwd: root, stdio: "inherit" });
  }
});

after(() => {
  for (const s of servers) s.proc.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

function freePort() {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => res(port));
    });
    srv.on("error", rej);
  });
}

// startServer starts turnd and resolves once /readyz answers 200; its
// logged complete_urls are queued on .keys.
async function startServer(env = {}) {
  const port = await freePort();
  const data = join(dir, `turnd-${port}.db`);
  const childEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...env };
  const proc = spawn(bin, ["serve", "--addr", `127.0.0.1:${port}`, "--log-format", "json", "--config", join(root, "examples/turnd.yaml"), "--demo", "--data", data], {
    env: childEnv,
    stdio: ["ignore", "ignore", "pipe"],
  });
  const server = { proc, url: `http://127.0.0.1:${port}`, keys: [], waiters: [], log: [] };
  servers.push(server);
  createInterface({ input: proc.stderr }).on("line", (line) => {
    server.log.push(line);
    try {
      const rec = JSON.parse(line);
      if (rec.complete_url) {
        const w = server.waiters.shift();
        if (w) w(rec.complete_url);
        else server.keys.push(rec.complete_url);
      }
    } catch {}
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const r = await fetch(server.url + "/readyz");
      if (r.status === 200) break;
    } catch {}
    if (Date.now() > deadline) throw new Error("turnd not ready within 30s:\n" + server.log.join("\n"));
    await new Promise((r) => setTimeout(r, 20));
  }
  server.nextKey = () =>
    server.keys.length > 0
      ? Promise.resolve(server.keys.shift())
      : new Promise((res, rej) => {
          const t = setTimeout(() => rej(new Error("no approval logged within 30s")), 30_000);
          server.waiters.push((k) => {
            clearTimeout(t);
            res(k);
          });
        });
  return server;
}

let srv;
let c;
before(async () => {
  srv = await startServer();
  c = new Client({ url: srv.url });
});

test("postTurn runs a turn, and a repost replays it", async () => {
  const calls = [
    { id: "c1", name: "now", arguments: {} },
    { id: "c2", name: "echo", arguments: { text: "hi" } },
    { id: "c3", name: "nope" },
  ];
  const turn = await c.postTurn("ts-post", { calls });
  assert.match(turn.id, /^turn_[A-Z2-7]{26}$/);
  assert.equal(turn.status, "completed");
  assert.equal(turn.replayed, false);
  assert.deepEqual(turn.results.map((r) => [r.call_id, r.status]), [["c1", "ok"], ["c2", "ok"], ["c3", "refused"]]);
  assert.deepEqual(turn.results[1].output, { text: "hi" });
  const again = await c.postTurn("ts-post", { id: turn.id, calls });
  assert.equal(again.replayed, true);
  const lines = [];
  for await (const l of c.ledger("ts-post")) lines.push(l);
  assert.deepEqual(lines.map((l) => l.seq), lines.map((_, i) => i + 1));
  assert.equal(lines.at(-1).kind, "turn_settled");
  const tools = await c.tools("ts-post");
  assert.ok(tools.some((t) => t.name === "echo"));
});

test("problems are TurndErrors with their code", async () => {
  await assert.rejects(c.turn("nobody", "nothing"), (e) => e instanceof TurndError && e.status === 404 && e.code === "not_found");
  await c.postTurn("ts-err", { id: "t1", calls: [{ id: "a", name: "now" }] });
  await assert.rejects(c.postTurn("ts-err", { id: "t1", calls: [{ id: "a", name: "echo" }] }), (e) => e instanceof TurndError && e.status === 409 && e.code === "turn_conflict" && !!e.detail);
});

test("a deferred call: status, heartbeat, complete, await, events", async () => {
  const posted = await c.postTurn("ts-def", { id: "ap", calls: [{ id: "e", name: "echo", arguments: { text: "x" } }, { id: "a", name: "approval", arguments: { prompt: "?" } }] }, { async: true });
  assert.notEqual(posted.status, "completed");
  const key = await srv.nextKey();
  const info = await c.completionStatus(key);
  assert.ok(["issued", "pending"].includes(info.status));
  await c.heartbeat(key);
  assert.equal((await c.complete(key, { approved: true })).status, "accepted");
  assert.equal((await c.complete(key, { approved: true })).status, "already_completed");
  await assert.rejects(c.completeError(key, "no", "changed my mind"), (e) => e.code === "completion_conflict");
  const done = await c.await("ts-def", "ap");
  assert.equal(done.status, "completed");
  assert.deepEqual(done.results[1].output, { approved: true });
  const kinds = [];
  const seqs = [];
  for await (const l of c.events("ts-def", "ap")) {
    kinds.push(l.kind);
    seqs.push(l.seq);
  }
  assert.equal(kinds[0], "turn_received");
  assert.equal(kinds.at(-1), "turn_settled");
  assert.ok(kinds.includes("call_pending"));
  const resumed = [];
  for await (const l of c.events("ts-def", "ap", seqs[2])) resumed.push(l.seq);
  assert.deepEqual(resumed, seqs.slice(3));
  for await (const l of c.events("ts-def", "ap", seqs.at(-1))) assert.fail(`resumed after turn_settled: ${JSON.stringify(l)}`);
});

test("provider formats: OpenAI chat, Responses, Anthropic with placeholders", async () => {
  const chat = await c.postOpenAIChat("ts-prov", {
    id: "chatcmpl-1",
    choices: [{ message: { role: "assistant", tool_calls: [{ id: "call_1", type: "function", function: { name: "echo", arguments: '{"text":"hi"}' } }] } }],
  });
  assert.equal(chat.ready, true);
  assert.deepEqual(chat.messages, [{ role: "tool", tool_call_id: "call_1", content: '{"text":"hi"}' }]);
  const resp = await c.postOpenAIResponse("ts-prov", { id: "resp_1", output: [{ type: "function_call", call_id: "call_2", name: "echo", arguments: '{"text":"yo"}' }] });
  assert.deepEqual(resp.messages, [{ type: "function_call_output", call_id: "call_2", output: '{"text":"yo"}' }]);
  const msg = {
    id: "msg_1",
    type: "message",
    role: "assistant",
    content: [
      { type: "tool_use", id: "toolu_1", name: "echo", input: { text: "a" } },
      { type: "tool_use", id: "toolu_2", name: "approval", input: { prompt: "?" } },
    ],
  };
  const a = await c.postAnthropicMessage("ts-prov", msg, { placeholders: true });
  assert.equal(a.ready, true);
  assert.equal(a.status, "waiting");
  assert.equal(a.placeholders, 1);
  assert.equal(a.messages.role, "user");
  assert.equal(a.messages.content[0].tool_use_id, "toolu_1");
  await c.complete(await srv.nextKey(), "yes");
  await c.await("ts-prov", "msg_1");
  const f = await c.providerResults("ts-prov", "msg_1", "anthropic.messages", true);
  assert.equal(f.ready, true);
  assert.equal(f.messages.content[0].type, "text");
});

test("retries keep one turn id and stop at 4xx", async () => {
  const bodies = [];
  let n = 0;
  const fake = async (url, init) => {
    bodies.push(JSON.parse(init.body));
    assert.equal(init.headers["Content-Type"], "application/json");
    n++;
    if (n === 1) throw new TypeError("fetch failed");
    if (n === 2) return new Response(JSON.stringify({ status: 503, code: "store_unavailable", title: "x", type: "x" }), { status: 503, headers: { "Retry-After": "0" } });
    return new Response(JSON.stringify({ id: bodies[0].id, status: "completed", results: [] }), { status: 200 });
  };
  const rc = new Client({ url: "http://127.0.0.1:1", fetch: fake, retry: { backoffMs: 1 } });
  const t = await rc.postTurn("s", { calls: [{ id: "a", name: "now" }] });
  assert.equal(n, 3);
  assert.ok(bodies.every((b) => b.id === bodies[0].id));
  assert.equal(t.id, bodies[0].id);
  let m = 0;
  const four = async () => {
    m++;
    return new Response(JSON.stringify({ status: 409, code: "turn_conflict", title: "Conflict", type: "x" }), { status: 409 });
  };
  await assert.rejects(new Client({ url: "http://127.0.0.1:1", fetch: four }).postTurn("s", { calls: [] }), (e) => e.code === "turn_conflict");
  assert.equal(m, 1);
  assert.match(newTurnId(), /^turn_/);
});

test("signed completions", async () => {
  const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const s = await startServer({ TURND_COMPLETION_SIGNING_SECRET: secret });
  const plain = new Client({ url: s.url });
  const signed = new Client({ url: s.url, signingSecret: secret });
  await plain.postTurn("sig", { id: "ap", calls: [{ id: "a", name: "approval", arguments: { prompt: "?" } }] }, { async: true });
  const key = await s.nextKey();
  await assert.rejects(plain.complete(key, true), (e) => e.status === 401 && e.code === "bad_signature");
  await signed.heartbeat(key);
  assert.equal((await signed.complete(key, true)).status, "accepted");
  assert.equal((await plain.await("sig", "ap")).results[0].output, true);
});
