// The client against a real `turnd serve` (the embedded store, the demo
// tools), started by the test on a free loopback port. The binary is
// $TURND_BIN, else bin/turnd at the repository's root, else built here.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { createServer as createHTTPServer } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

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
// logged complete_urls are queued on .keys. Options: config, a tool
// config's text (default examples/turnd.yaml); demo (default true).
async function startServer(env = {}, { config, demo = true } = {}) {
  const port = await freePort();
  const data = join(dir, `turnd-${port}.db`);
  const childEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...env };
  let configPath = join(root, "examples/turnd.yaml");
  if (config) {
    configPath = join(dir, `turnd-${port}.yaml`);
    writeFileSync(configPath, config);
  }
  const args = ["serve", "--addr", `127.0.0.1:${port}`, "--log-format", "json", "--config", configPath, "--data", data];
  if (demo) args.push("--demo");
  const proc = spawn(bin, args, {
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
  // A stream is sent once: neither a 503 nor a connection error is retried.
  for (const fail of [() => new Response(JSON.stringify({ status: 503, code: "store_unavailable", title: "x", type: "x" }), { status: 503, headers: { "Retry-After": "0" } }), () => { throw new TypeError("fetch failed"); }]) {
    let k = 0;
    const once = async (url, init) => {
      k++;
      assert.equal(init.headers["Content-Type"], "application/x-ndjson");
      assert.equal(init.duplex, "half");
      return fail();
    };
    await assert.rejects(new Client({ url: "http://127.0.0.1:1", fetch: once, retry: { backoffMs: 1 } }).postTurnStream("s", [{ id: "t" }]));
    assert.equal(k, 1);
  }
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

// probeTool is an HTTP tool's server: it answers each call with its
// arguments, and seen(callId) resolves once that call's request arrived
// (rejecting after 20 s: an early read that never started fails the test).
async function probeTool() {
  const arrived = new Map();
  const waiting = new Map();
  const srv = createHTTPServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const call = JSON.parse(body);
      arrived.set(call.call_id, call);
      waiting.get(call.call_id)?.(call);
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ output: { probed: call.arguments } }));
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  after(() => srv.close());
  return {
    url: `http://127.0.0.1:${srv.address().port}/`,
    seen: (id) =>
      arrived.has(id)
        ? Promise.resolve(arrived.get(id))
        : new Promise((res, rej) => {
            const t = setTimeout(() => rej(new Error(`the tool was not called for ${id} within 20s`)), 20_000);
            waiting.set(id, (c) => {
              clearTimeout(t);
              res(c);
            });
          }),
  };
}

const probeConfig = (url) => `builtin: [echo, sleep, now, approval]
tools:
  - name: probe
    description: a read the test watches
    effect: read
    input_schema: {type: object}
    http: {url: "${url}"}
`;

// Provider streams as the APIs send them, one part per write: parts[i]
// ends call i's arguments (for openai.chat, call i is complete only when
// call i+1's first fragment comes, so parts[i] carries that too).
function chatStream(id, calls, finish = "tool_calls") {
  const chunk = (delta, finish_reason = null) =>
    `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1733000000, model: "gpt-4.1", choices: [{ index: 0, delta, logprobs: null, finish_reason }] })}\n\n`;
  const first = (i) => chunk({ tool_calls: [{ index: i, id: calls[i].id, type: "function", function: { name: calls[i].name, arguments: "" } }] });
  const parts = [];
  let part = chunk({ role: "assistant", content: "" }) + chunk({ content: "Let me look." }) + first(0);
  calls.forEach((c, i) => {
    const a = JSON.stringify(c.arguments);
    part += chunk({ tool_calls: [{ index: i, function: { arguments: a.slice(0, 4) } }] }) + chunk({ tool_calls: [{ index: i, function: { arguments: a.slice(4) } }] });
    if (i + 1 < calls.length) part += first(i + 1);
    else part += chunk({}, finish);
    parts.push(part);
    part = "";
  });
  parts.push("data: [DONE]\n\n");
  return parts;
}

function messagesStream(id, calls, stop = "tool_use") {
  const ev = (type, f) => `event: ${type}\ndata: ${JSON.stringify({ type, ...f })}\n\n`;
  const parts = [];
  let part =
    ev("message_start", { message: { id, type: "message", role: "assistant", content: [], model: "claude-sonnet-4-5", stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1 } } }) +
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) +
    ev("ping", {}) +
    ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Let me look." } }) +
    ev("content_block_stop", { index: 0 });
  calls.forEach((c, i) => {
    const a = JSON.stringify(c.arguments);
    part +=
      ev("content_block_start", { index: i + 1, content_block: { type: "tool_use", id: c.id, name: c.name, input: {} } }) +
      ev("content_block_delta", { index: i + 1, delta: { type: "input_json_delta", partial_json: a.slice(0, 4) } }) +
      ev("content_block_delta", { index: i + 1, delta: { type: "input_json_delta", partial_json: a.slice(4) } }) +
      ev("content_block_stop", { index: i + 1 });
    parts.push(part);
    part = "";
  });
  parts.push(ev("message_delta", { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 30 } }) + ev("message_stop", {}));
  return parts;
}

// modelAPI stands in for a provider's API: each POST streams parts, and
// before writing parts[hold] it waits for gate() (default: at once).
async function modelAPI(parts, { hold = -1, gate = () => Promise.resolve() } = {}) {
  const srv = createHTTPServer(async (req, res) => {
    for await (const _ of req);
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    for (let i = 0; i < parts.length; i++) {
      if (i === hold) await gate();
      res.write(parts[i]);
    }
    res.end();
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  after(() => srv.close());
  return `http://127.0.0.1:${srv.address().port}`;
}

// The SDKs' own parsing of an event stream: the data of each event.
const eventsOf = (parts) =>
  parts
    .join("")
    .split("\n\n")
    .map((e) => e.split("\n").find((l) => l.startsWith("data: "))?.slice(6))
    .filter((d) => d && d !== "[DONE]" && d !== '{"type":"ping"}')
    .map((d) => JSON.parse(d));

test("streamed turns: NDJSON reads start before the stream ends; a provider stream; a cut stream", async () => {
  const probe = await probeTool();
  const s = await startServer({}, { config: probeConfig(probe.url) });
  const sc = new Client({ url: s.url });
  let ended = false;
  async function* lines() {
    yield { id: "nd-1" };
    yield { id: "r1", name: "probe", arguments: { q: "a" } };
    // The read runs while the turn is still being written.
    const call = await probe.seen("r1");
    assert.equal(ended, false);
    assert.equal(call.turn_id, "nd-1");
    yield '{"id":"w1","name":"echo","arguments":{"text":"after"}}\n';
    ended = true;
  }
  const turn = await sc.postTurnStream("ts-stream", lines());
  assert.equal(turn.status, "completed");
  assert.deepEqual(turn.results.map((r) => [r.call_id, r.status]), [["r1", "ok"], ["w1", "ok"]]);
  assert.deepEqual(turn.results[0].output, { probed: { q: "a" } });
  const again = await sc.postTurnStream("ts-stream", [JSON.stringify({ id: "nd-1" }) + "\n", JSON.stringify({ id: "r1", name: "probe", arguments: { q: "a" } }) + "\n", '{"id":"w1","name":"echo","arguments":{"text":"after"}}\n']);
  assert.equal(again.replayed, true);

  // A provider's stream as bytes (a ReadableStream, as fetch gives a body).
  const calls = [{ id: "call_1", name: "probe", arguments: { q: "b" } }, { id: "call_2", name: "echo", arguments: { text: "x" } }];
  const parts = chatStream("chatcmpl-s1", calls);
  const body = new ReadableStream({
    start(ctrl) {
      for (const p of parts) ctrl.enqueue(new TextEncoder().encode(p));
      ctrl.close();
    },
  });
  const reply = await sc.postProviderStream("ts-stream", "openai.chat", body);
  assert.equal(reply.ready, true);
  assert.deepEqual(reply.messages.map((m) => m.tool_call_id), ["call_1", "call_2"]);

  // Cut before the finish event: nothing recorded, 422 stream_incomplete.
  await assert.rejects(sc.postProviderStream("ts-stream", "openai.chat", parts.slice(0, 1), { turnId: "cut-1" }), (e) => e instanceof TurndError && e.status === 422 && e.code === "stream_incomplete");
  await assert.rejects(sc.turn("ts-stream", "cut-1"), (e) => e.status === 404);

  // A source that fails aborts the post: the NDJSON turn is not recorded.
  async function* broken() {
    yield { id: "nd-broken" };
    yield { id: "e1", name: "echo", arguments: { text: "a" } };
    throw new Error("the producer failed");
  }
  await assert.rejects(sc.postTurnStream("ts-stream", broken()));
  await assert.rejects(sc.turn("ts-stream", "nd-broken"), (e) => e.status === 404);
});

test("teeProviderStream: the OpenAI SDK's stream is read as usual while turnd runs it", async () => {
  const probe = await probeTool();
  const s = await startServer({}, { config: probeConfig(probe.url) });
  const sc = new Client({ url: s.url });
  const calls = [{ id: "call_a", name: "probe", arguments: { q: "from the stream" } }, { id: "call_b", name: "echo", arguments: { text: "b" } }];
  const parts = chatStream("chatcmpl-tee", calls);
  // The model holds the rest of its stream until turnd has called the
  // probe: turnd gets the events while the model is still generating.
  const model = await modelAPI(parts, { hold: 1, gate: () => probe.seen("call_a") });
  const openai = new OpenAI({ baseURL: `${model}/v1`, apiKey: "test", maxRetries: 0 });
  const sdkStream = await openai.chat.completions.create({ model: "gpt-4.1", messages: [{ role: "user", content: "look" }], stream: true });
  const { stream, reply } = sc.teeProviderStream("ts-tee", "openai.chat", sdkStream);
  assert.equal(typeof stream.controller?.abort, "function"); // still the SDK's Stream
  const seen = [];
  for await (const chunk of stream) seen.push(chunk);
  assert.deepEqual(seen, eventsOf(parts)); // the caller saw every event
  const r = await reply;
  assert.equal(r.ready, true);
  assert.deepEqual(r.messages.map((m) => m.tool_call_id), ["call_a", "call_b"]);
  assert.match(r.messages[0].content, /from the stream/);
  const t = await sc.turn("ts-tee", "chatcmpl-tee");
  assert.equal(t.results.length, 2);
});

test("teeProviderStream: the Anthropic SDK's stream, and a caller that stops early", async () => {
  const calls = [{ id: "toolu_1", name: "echo", arguments: { text: "one" } }, { id: "toolu_2", name: "now", arguments: {} }];
  const parts = messagesStream("msg_tee", calls);
  const model = await modelAPI(parts);
  const anthropic = new Anthropic({ baseURL: model, apiKey: "test", maxRetries: 0 });
  const sdkStream = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 100, messages: [{ role: "user", content: "hi" }], stream: true });
  const { stream, reply } = c.teeProviderStream("ts-tee-a", "anthropic.messages", sdkStream);
  const seen = [];
  for await (const ev of stream) seen.push(ev);
  assert.deepEqual(seen, eventsOf(parts));
  const r = await reply;
  assert.equal(r.ready, true);
  assert.deepEqual(r.messages.content.map((b) => b.tool_use_id), ["toolu_1", "toolu_2"]);

  // A plain async iterable of the API's events is sent as the caller reads
  // it: a caller that stops before the finish event cuts the stream.
  async function* events() {
    yield* eventsOf(messagesStream("msg_cut", calls));
  }
  const cut = c.teeProviderStream("ts-tee-a", "anthropic.messages", events());
  let n = 0;
  for await (const _ of cut.stream) if (++n === 3) break;
  await assert.rejects(cut.reply, (e) => e instanceof TurndError && e.code === "stream_incomplete");
  await assert.rejects(c.turn("ts-tee-a", "msg_cut"), (e) => e.status === 404);
});

test("listings: sessions, a session's turns and the parked calls, page by page", async () => {
  const s = await startServer();
  const lc = new Client({ url: s.url });
  for (const id of ["l1", "l2", "l3"]) await lc.postTurn("ts-list", { id, calls: [{ id: `c-${id}`, name: "now" }] });
  assert.equal((await lc.postTurn("ts-list-2", { id: "w", calls: [{ id: "a", name: "approval" }] })).status, "waiting");
  const turns = [];
  for await (const t of lc.turns("ts-list", { limit: 2 })) turns.push(t.id);
  assert.deepEqual(turns, ["l3", "l2", "l1"]); // newest first, over two pages
  const first = await lc.turnsPage("ts-list", { limit: 2 });
  assert.equal(first.turns.length, 2);
  assert.notEqual(first.next_after, "");
  const rest = await lc.turnsPage("ts-list", { limit: 2, after: first.next_after });
  assert.deepEqual(rest.turns.map((t) => t.id), ["l1"]);
  assert.equal(rest.next_after, "");
  const sessions = [];
  for await (const x of lc.sessions({ limit: 1 })) sessions.push([x.id, x.turns]);
  assert.deepEqual(sessions, [["ts-list-2", 1], ["ts-list", 3]]);
  const parked = [];
  for await (const p of lc.pending()) parked.push(p);
  assert.equal(parked.length, 1);
  assert.equal(parked[0].turn_id, "w");
  assert.ok(!JSON.stringify(parked[0]).includes("ck_"));
  const posted = await lc.turnCalls("ts-list", "l1");
  assert.deepEqual(posted.map((x) => x.id), ["c-l1"]);
});

test("--demo: the approval's pending result carries its complete_url; without --demo it does not", async () => {
  const posted = await c.postTurn("ts-demo", { id: "d1", calls: [{ id: "a", name: "approval", arguments: { prompt: "ok?" } }] });
  assert.equal(posted.status, "waiting");
  const url = posted.results[0].output.complete_url;
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/v1\/complete\/ck_/);
  await srv.nextKey(); // the same URL is logged
  assert.equal((await c.complete(url, { approved: true })).status, "accepted");
  const done = await c.await("ts-demo", "d1");
  assert.deepEqual(done.results[0].output, { approved: true });

  const plain = await startServer({}, { demo: false });
  const pc = new Client({ url: plain.url });
  const t = await pc.postTurn("ts-demo", { id: "d1", calls: [{ id: "a", name: "approval" }] });
  assert.equal(t.status, "waiting");
  assert.equal(t.results[0].status, "pending");
  assert.equal(t.results[0].output, null);
  assert.ok(!JSON.stringify(t).includes("ck_"));
  assert.ok(!plain.log.join("\n").includes("ck_"));
});

test("approvals: paging, decide approve / edited / reject, and its refusals", async () => {
  const probe = await probeTool();
  const config = `builtin: [echo]
tools:
  - name: guarded
    description: a write that waits for approval
    effect: write
    approval: always
    input_schema: {type: object, required: [path], properties: {path: {type: string}}}
    http: {url: "${probe.url}"}
`;
  const s = await startServer({}, { config });
  const ac = new Client({ url: s.url });
  for (const id of ["ap", "ed", "rj"]) {
    const t = await ac.postTurn("ts-appr", { id, calls: [{ id: `g-${id}`, name: "guarded", arguments: { path: `${id}.txt` } }] }, { async: true });
    assert.notEqual(t.status, "completed");
  }
  const deadline = Date.now() + 20_000;
  let waiting = [];
  while (waiting.length < 3 && Date.now() < deadline) {
    waiting = [];
    for await (const a of ac.approvals({ limit: 2 })) waiting.push(a); // two pages
    if (waiting.length < 3) await new Promise((r) => setTimeout(r, 20));
  }
  assert.deepEqual(waiting.map((a) => a.call_id), ["g-rj", "g-ed", "g-ap"]); // newest first
  assert.deepEqual(waiting[2].arguments, { path: "ap.txt" });
  assert.equal(waiting[2].tool, "guarded");
  assert.ok(waiting[2].rule);
  const first = await ac.approvalsPage({ limit: 2 });
  assert.equal(first.approvals.length, 2);
  assert.notEqual(first.next_after, "");
  await assert.rejects(ac.approvalsPage({ after: "nonsense" }), (e) => e instanceof TurndError && e.status === 400 && e.code === "invalid_query");

  const ok = await ac.decide("ts-appr", "ap", "g-ap", { decision: "approve", by: "ts" });
  assert.deepEqual(ok, { decision: "approved", status: "accepted", session_id: "ts-appr", turn_id: "ap", call_id: "g-ap", edited: false });
  assert.deepEqual((await probe.seen("g-ap")).arguments, { path: "ap.txt" });
  assert.equal((await ac.decide("ts-appr", "ap", "g-ap", { decision: "approve" })).status, "already_decided");
  await assert.rejects(ac.decide("ts-appr", "ap", "g-ap", { decision: "reject", message: "no" }), (e) => e instanceof TurndError && e.status === 409 && (e.code === "already_decided" || e.code === "not_awaiting_approval"));
  const done = await ac.await("ts-appr", "ap");
  assert.equal(done.results[0].status, "ok");

  await assert.rejects(ac.decide("ts-appr", "ed", "g-ed", { decision: "approve", arguments: { path: 7 } }), (e) => e instanceof TurndError && e.status === 422 && e.code === "invalid_arguments" && !!e.detail);
  const edited = await ac.decide("ts-appr", "ed", "g-ed", { decision: "approve", arguments: { path: "edited.txt" } });
  assert.equal(edited.edited, true);
  assert.deepEqual((await probe.seen("g-ed")).arguments, { path: "edited.txt" });

  await assert.rejects(ac.decide("ts-appr", "rj", "g-rj", { decision: "reject", arguments: { path: "x" } }), (e) => e instanceof TurndError && e.status === 422 && e.code === "invalid_request");
  const no = await ac.decide("ts-appr", "rj", "g-rj", { decision: "reject", message: "use the staging copy" });
  assert.equal(no.decision, "rejected");
  const rejected = await ac.await("ts-appr", "rj");
  assert.equal(rejected.results[0].status, "rejected");
  assert.deepEqual(rejected.results[0].output, { rejected: true, message: "use the staging copy" });
  const kinds = [];
  for await (const l of ac.ledger("ts-appr")) if (l.turn_id === "rj") kinds.push(l.kind);
  assert.ok(kinds.includes("call_decided"), kinds.join(","));

  await assert.rejects(ac.decide("ts-appr", "rj", "nobody", { decision: "approve" }), (e) => e instanceof TurndError && e.status === 404 && e.code === "not_found");
  await ac.postTurn("ts-appr", { id: "plain", calls: [{ id: "e", name: "echo", arguments: { text: "hi" } }] });
  await assert.rejects(ac.decide("ts-appr", "plain", "e", { decision: "approve" }), (e) => e instanceof TurndError && e.status === 409 && e.code === "not_awaiting_approval");
  assert.equal((await ac.approvalsPage()).approvals.length, 0);
});
