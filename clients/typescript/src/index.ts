// The TypeScript client of turnd: fetch and WebCrypto only (Node 20+ and
// browsers), its types generated from openapi.yaml (src/openapi.ts, checked
// against it by `npm run check-types`).

import type { components } from "./openapi.js";
import { Pipe, bodyOf, eventsOf, ndjsonLine, rawChunk, sseEvent, sseLines } from "./body.js";
import { newTurnId } from "./ids.js";
import { importSigningKey, signHeaders } from "./webhook.js";

export type { components, paths, operations } from "./openapi.js";
export { newTurnId };

type Schemas = components["schemas"];
export type Session = Schemas["Session"];
export type SessionRequest = Schemas["SessionRequest"];
export type TurnRequest = Schemas["TurnRequest"];
export type Call = Schemas["Call"];
export type Turn = Schemas["Turn"];
export type Result = Schemas["Result"];
export type LedgerLine = Schemas["LedgerLine"];
export type LedgerPage = Schemas["LedgerPage"];
export type Tool = Schemas["Tool"];
export type Delivery = Schemas["Delivery"];
export type DeliveryAck = Schemas["DeliveryAck"];
export type CompletionInfo = Schemas["CompletionInfo"];
export type Problem = Schemas["Problem"];
export type SessionSummary = Schemas["SessionSummary"];
export type SessionPage = Schemas["SessionPage"];
export type TurnSummary = Schemas["TurnSummary"];
export type TurnPage = Schemas["TurnPage"];
export type ParkedCall = Schemas["ParkedCall"];
export type PendingPage = Schemas["PendingPage"];
/** A call the approval policy holds before its tool runs; its arguments are model output. */
export type Approval = Schemas["Approval"];
export type ApprovalPage = Schemas["ApprovalPage"];
/** Approve (optionally with edited arguments) or reject (with a message the model reads). */
export type Decision = Schemas["Decision"];
export type DecisionResult = Schemas["DecisionResult"];
/** A call's result status: ok, error, pending, refused, cancelled, timed_out or rejected. */
export type CallStatus = Schemas["CallStatus"];
/** The body of the approval.requested webhook turnd POSTs to a session's callback_url. */
export type ApprovalRequestedEvent = Schemas["ApprovalRequestedEvent"];
/** The body of the turn.settled webhook turnd POSTs to a session's callback_url. */
export type TurnSettledEvent = Schemas["TurnSettledEvent"];
/** What turnd POSTs to an HTTP tool, and what the tool answers. */
export type ToolRequest = Schemas["ToolRequest"];
export type ToolResponse = Schemas["ToolResponse"];
/** What turnd POSTs to a deferred HTTP tool's cancel_url. */
export type CancelRequest = Schemas["CancelRequest"];

/** The provider formats a turn may be posted in. */
export type ProviderFormat = "openai.chat" | "openai.responses" | "anthropic.messages";

export const DEFAULT_URL = "http://127.0.0.1:8080";

/** An answer the server gave as an RFC 9457 problem (or any 4xx/5xx). */
export class TurndError extends Error {
  readonly status: number;
  /** The stable machine-readable code: not_found, turn_conflict, … */
  readonly code: string;
  readonly title: string;
  readonly detail?: string;
  readonly type?: string;
  /** The server's Retry-After in milliseconds, 0 when it sent none. */
  readonly retryAfterMs: number;

  constructor(status: number, problem: Partial<Problem>, retryAfterMs: number) {
    const code = problem.code ?? `http_${status}`;
    super(problem.detail ? `turnd answered ${status} ${code}: ${problem.detail}` : `turnd answered ${status} ${code}`);
    this.name = "TurndError";
    this.status = status;
    this.code = code;
    this.title = problem.title ?? "";
    this.detail = problem.detail;
    this.type = problem.type;
    this.retryAfterMs = retryAfterMs;
  }
}

/** Bounds on the client's own retries (connection errors, 503). */
export interface RetryPolicy {
  /** Most attempts per request, the first included (default 4). */
  maxAttempts?: number;
  /** Most total time waited between attempts (default 30 s). */
  maxWaitMs?: number;
  /** First wait when there is no Retry-After, doubled each time (default 200 ms). */
  backoffMs?: number;
}

export interface ClientOptions {
  /** turnd's base URL (default http://127.0.0.1:8080). */
  url?: string;
  /** Bearer token for /v1 (not sent to /v1/complete, whose key is the credential). */
  token?: string;
  /** Signs completion deliveries and heartbeats (Standard Webhooks). */
  signingSecret?: string;
  retry?: RetryPolicy;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
}

export interface PostOptions {
  /** Hold until the turn settles or this many seconds pass (Prefer: wait). */
  waitSeconds?: number;
  /** Answer at once (Prefer: respond-async). */
  async?: boolean;
  signal?: AbortSignal;
}

export interface ProviderOptions extends PostOptions {
  /** The turn id; default the message's own id, so that a retry replays. */
  turnId?: string;
  /** Answer waiting calls with placeholders now (pending=placeholder). */
  placeholders?: boolean;
  mode?: "ordered" | "concurrent";
  failurePolicy?: "isolate" | "fail_fast";
}

/**
 * What a provider-format post answers: `messages` to append when `ready`;
 * otherwise the turn is running or waiting and `turn` is its state.
 */
export interface ProviderReply<M = unknown> {
  ready: boolean;
  messages?: M;
  status: string;
  placeholders: number;
  followUp?: string;
  replayed: boolean;
  turn?: Turn;
}

/**
 * A listing page's selection: `after` is the previous page's `next_after`
 * (none for the first page), `limit` at most 500 (none: the server's
 * default), `status` keeps only turns in that status (turns only).
 */
export interface ListOptions {
  after?: string;
  limit?: number;
  status?: string;
  signal?: AbortSignal;
}

/**
 * A body sent as it is produced: a ReadableStream of bytes, or an
 * (async) iterable of byte or text chunks.
 */
export type StreamSource = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>;

/**
 * A native streamed turn's lines: the header ({id, mode?, failure_policy?})
 * and then one call ({id, name, arguments}) per item, each written as one
 * NDJSON line; strings and bytes are sent as they are.
 */
export type TurnStreamSource = StreamSource | AsyncIterable<unknown> | Iterable<unknown>;

/** What teeProviderStream answers: the stream to read, and turnd's answer. */
export interface TeedStream<S> {
  /** Read this as the SDK's stream (for an SDK stream, one of its tee()). */
  stream: S;
  /**
   * turnd's answer once the stream ended (422 stream_incomplete when it
   * ended short of the provider's finish event).
   */
  reply: Promise<ProviderReply>;
}

/** A posted turn, with whether it was replayed from the record. */
export type PostedTurn = Turn & { replayed: boolean };

interface Req {
  method: string;
  path: string;
  body?: string;
  /** A streamed body, sent with contentType once: never retried. */
  stream?: ReadableStream<Uint8Array>;
  contentType?: string;
  headers?: Record<string, string>;
  noAuth?: boolean;
  sign?: boolean;
  signal?: AbortSignal;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });

function retryAfterMs(v: string | null): number {
  if (!v) return 0;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? 0 : Math.max(0, t - Date.now());
}

async function errorFrom(resp: Response): Promise<TurndError> {
  let problem: Partial<Problem> = {};
  const text = await resp.text().catch(() => "");
  try {
    problem = JSON.parse(text);
  } catch {
    problem = { detail: text || undefined };
  }
  return new TurndError(resp.status, problem, retryAfterMs(resp.headers.get("Retry-After")));
}

/** Whether the server answered a post from the record (Turnd-Replayed). */
const replayed = (resp: Response) => resp.headers.get("Turnd-Replayed") === "true";

/** Whether a turn in this status has settled (completed, failed, cancelled). */
const settled = (status: string) => status === "completed" || status === "failed" || status === "cancelled";

const enc = (s: string) => encodeURIComponent(s);
const sessionPath = (session: string) => `/v1/sessions/${enc(session)}`;
const turnsPath = (session: string) => `${sessionPath(session)}/turns`;
const turnPath = (session: string, turn: string) => `${turnsPath(session)}/${enc(turn)}`;

/** The path of a completion key, given bare or as its complete URL. */
function completePath(key: string): string {
  const m = /^https?:\/\/[^/]+\/v1\/complete\/([^/?#]+)/.exec(key);
  return "/v1/complete/" + (m ? m[1] : enc(key));
}

export class Client {
  readonly url: string;
  private readonly token?: string;
  private readonly fetch: typeof fetch;
  private readonly retry: Required<RetryPolicy>;
  private readonly signer?: Promise<CryptoKey>;

  constructor(opts: ClientOptions = {}) {
    this.url = (opts.url ?? DEFAULT_URL).replace(/\/+$/, "");
    if (!/^https?:\/\/[^/]+/.test(this.url)) throw new Error(`turnd client: base URL ${this.url}: want http(s)://host[:port]`);
    this.token = opts.token;
    this.fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.retry = { maxAttempts: 4, maxWaitMs: 30_000, backoffMs: 200, ...opts.retry };
    if (opts.signingSecret) this.signer = importSigningKey(opts.signingSecret);
  }

  /** Sends a request, retrying connection errors and 503 within the policy. */
  private async do(r: Req): Promise<Response> {
    let waited = 0;
    let backoff = this.retry.backoffMs;
    for (let attempt = 1; ; attempt++) {
      let wait: number;
      let err: unknown;
      try {
        const resp = await this.send(r);
        if (resp.status < 400) return resp;
        const e = await errorFrom(resp);
        if (resp.status !== 503 || r.stream) throw e;
        err = e;
        wait = e.retryAfterMs || backoff;
      } catch (e) {
        // Every TurndError here is final: a retryable 503 left the try above.
        if (e instanceof TurndError || r.signal?.aborted || r.stream) throw e; // a stream's bytes are gone
        err = e;
        wait = backoff;
      }
      if (attempt >= this.retry.maxAttempts || waited + wait > this.retry.maxWaitMs) throw err;
      await sleep(wait, r.signal);
      waited += wait;
      backoff *= 2;
    }
  }

  private async send(r: Req): Promise<Response> {
    const headers: Record<string, string> = { Accept: "application/json, application/problem+json", ...r.headers };
    if (r.body !== undefined) headers["Content-Type"] = "application/json";
    if (r.stream) headers["Content-Type"] = r.contentType!;
    if (this.token && !r.noAuth) headers["Authorization"] = `Bearer ${this.token}`;
    if (r.sign && this.signer) Object.assign(headers, await signHeaders(await this.signer, r.body ?? ""));
    if (r.stream) {
      // duplex: a request body sent while it is produced (fetch's streams).
      const init = { method: r.method, headers, body: r.stream, signal: r.signal, duplex: "half" };
      return this.fetch(this.url + r.path, init as RequestInit);
    }
    return this.fetch(this.url + r.path, { method: r.method, headers, body: r.body, signal: r.signal });
  }

  private async json<T>(r: Req): Promise<{ value: T; resp: Response }> {
    const resp = await this.do(r);
    return { value: (await resp.json()) as T, resp };
  }

  /** Creates a session explicitly (the first turn to an unknown id creates it too). */
  async createSession(req: SessionRequest = {}, signal?: AbortSignal): Promise<Session> {
    return (await this.json<Session>({ method: "POST", path: "/v1/sessions", body: JSON.stringify(req), signal })).value;
  }

  async session(id: string, signal?: AbortSignal): Promise<Session> {
    return (await this.json<Session>({ method: "GET", path: sessionPath(id), signal })).value;
  }

  /**
   * Posts a native turn. A turn without an id gets one before the first
   * attempt, so the client's own retries replay it instead of running it twice.
   */
  async postTurn(session: string, req: TurnRequest, opts: PostOptions = {}): Promise<PostedTurn> {
    const body = { ...req, id: req.id ?? newTurnId() };
    const { value, resp } = await this.json<Turn>({
      method: "POST",
      path: turnsPath(session),
      body: JSON.stringify(body),
      headers: prefer(opts),
      signal: opts.signal,
    });
    return { ...value, replayed: replayed(resp) };
  }

  /**
   * Posts a provider's own message (an OpenAI Chat Completion or its message,
   * a Responses API response, an Anthropic message) and answers the messages
   * to append to the conversation.
   */
  async postProvider<M = unknown>(session: string, format: ProviderFormat, message: unknown, opts: ProviderOptions = {}): Promise<ProviderReply<M>> {
    const body = typeof message === "string" ? message : JSON.stringify(message);
    return this.providerReply<M>({ method: "POST", path: providerPath(session, format, opts), body, headers: prefer(opts), signal: opts.signal });
  }

  /**
   * Posts a native turn as NDJSON while it is produced: the header line,
   * then one call per line; the end of the source ends the turn. Reads at
   * the head of the turn start as their lines arrive. Sent once, never
   * retried; a source that fails aborts the post, recording nothing.
   */
  async postTurnStream(session: string, source: TurnStreamSource, opts: PostOptions = {}): Promise<PostedTurn> {
    const { value, resp } = await this.json<Turn>({
      method: "POST",
      path: turnsPath(session),
      stream: bodyOf(source, ndjsonLine),
      contentType: "application/x-ndjson",
      headers: prefer(opts),
      signal: opts.signal,
    });
    return { ...value, replayed: replayed(resp) };
  }

  /**
   * Posts a turn as the model streams it: source is the provider API's
   * event stream (text/event-stream bytes) as it arrives, so that turnd
   * starts the turn's leading reads while the model still generates. The
   * answer is postProvider's for the whole message; a stream that ends
   * short of the provider's finish event answers 422 stream_incomplete.
   * Sent once, never retried.
   */
  postProviderStream<M = unknown>(session: string, format: ProviderFormat, source: StreamSource, opts: ProviderOptions = {}): Promise<ProviderReply<M>> {
    return this.providerReply<M>({
      method: "POST",
      path: providerPath(session, format, opts),
      stream: bodyOf(source, rawChunk),
      contentType: "text/event-stream",
      headers: prefer(opts),
      signal: opts.signal,
    });
  }

  /**
   * Tees a provider SDK's stream (openai's `create({stream: true})`,
   * `@anthropic-ai/sdk`'s `messages.create({stream: true})`, or any async
   * iterable of the API's events) to turnd as a streamed turn: read
   * `stream` as you would the SDK's (for an SDK stream it is one side of
   * its tee(), with its controller), while every event is written to
   * turnd as the API's event stream. Events may also be raw chunks of
   * the API's bytes, sent as they are.
   *
   * An SDK stream is read to its end for turnd whatever the caller reads.
   * A plain async iterable is sent as the caller reads it: a caller that
   * stops early ends the post (stream_incomplete unless the finish event
   * came), and one whose source fails aborts it.
   */
  teeProviderStream<S extends AsyncIterable<unknown>>(session: string, format: ProviderFormat, stream: S, opts: ProviderOptions = {}): TeedStream<S> {
    const encode = (ev: unknown) => sseEvent(format, ev);
    const end = format === "openai.chat" ? "data: [DONE]\n\n" : "";
    const tee = (stream as { tee?: () => [S, S] }).tee;
    if (typeof tee === "function") {
      const [mine, theirs] = tee.call(stream);
      const reply = this.postProviderStream(session, format, eventsOf(theirs, encode, end), opts);
      return { stream: mine, reply };
    }
    const pipe = new Pipe();
    const reply = this.postProviderStream(session, format, pipe.readable, opts);
    reply.catch(() => {}).finally(() => pipe.dead());
    async function* forward(): AsyncGenerator<unknown> {
      let clean = false;
      try {
        for await (const ev of stream) {
          pipe.write(encode(ev));
          yield ev;
        }
        clean = true;
      } catch (e) {
        pipe.fail(e);
        throw e;
      } finally {
        // The end of the events (or the caller stopping) ends turnd's body.
        if (clean && end) pipe.write(end);
        pipe.close();
      }
    }
    return { stream: forward() as unknown as S, reply };
  }

  /** postProvider with format openai.chat: answers the tool messages. */
  postOpenAIChat(session: string, completion: unknown, opts?: ProviderOptions) {
    return this.postProvider<Array<{ role: "tool"; tool_call_id: string; content: string }>>(session, "openai.chat", completion, opts);
  }

  /** postProvider with format openai.responses: answers the function_call_output items. */
  postOpenAIResponse(session: string, response: unknown, opts?: ProviderOptions) {
    return this.postProvider<Array<{ type: "function_call_output"; call_id: string; output: string }>>(session, "openai.responses", response, opts);
  }

  /** postProvider with format anthropic.messages: answers the user message of tool_result blocks. */
  postAnthropicMessage(session: string, message: unknown, opts?: ProviderOptions) {
    return this.postProvider<{ role: "user"; content: Array<Record<string, unknown>> }>(session, "anthropic.messages", message, opts);
  }

  /** A turn's rendering in a provider format; with followUp, the real results of its placeholders. */
  providerResults<M = unknown>(session: string, turn: string, format: ProviderFormat, followUp = false, signal?: AbortSignal) {
    const q = new URLSearchParams({ format });
    if (followUp) q.set("since", "placeholder");
    return this.providerReply<M>({ method: "GET", path: `${turnPath(session, turn)}?${q}`, signal });
  }

  private async providerReply<M>(r: Req): Promise<ProviderReply<M>> {
    const resp = await this.do(r);
    const reply: ProviderReply<M> = {
      ready: resp.status === 200,
      status: resp.headers.get("Turnd-Turn-Status") ?? "",
      placeholders: Number(resp.headers.get("Turnd-Placeholders") ?? 0),
      followUp: resp.headers.get("Turnd-Follow-Up") ?? undefined,
      replayed: replayed(resp),
    };
    const body = await resp.json();
    if (reply.ready) reply.messages = body as M;
    else {
      reply.turn = body as Turn;
      reply.status ||= reply.turn.status;
    }
    return reply;
  }

  /** One page of sessions, newest first. */
  async sessionsPage(opts: ListOptions = {}): Promise<SessionPage> {
    return (await this.json<SessionPage>({ method: "GET", path: `/v1/sessions${listQuery({ ...opts, status: undefined })}`, signal: opts.signal })).value;
  }

  /** One page of a session's turns, newest first, without their results. */
  async turnsPage(session: string, opts: ListOptions = {}): Promise<TurnPage> {
    return (await this.json<TurnPage>({ method: "GET", path: `${turnsPath(session)}${listQuery(opts)}`, signal: opts.signal })).value;
  }

  /** One page of the calls parked now, across sessions, newest first (never their keys). */
  async pendingPage(opts: ListOptions = {}): Promise<PendingPage> {
    return (await this.json<PendingPage>({ method: "GET", path: `/v1/pending${listQuery({ ...opts, status: undefined })}`, signal: opts.signal })).value;
  }

  /** Every session, newest first, page by page (`opts.after` starts later). */
  sessions(opts: ListOptions = {}): AsyncGenerator<SessionSummary> {
    return paged(opts, (o) => this.sessionsPage(o), (p) => p.sessions);
  }

  /** A session's turns, newest first, page by page. */
  turns(session: string, opts: ListOptions = {}): AsyncGenerator<TurnSummary> {
    return paged(opts, (o) => this.turnsPage(session, o), (p) => p.turns);
  }

  /** The calls parked now, newest first, page by page. */
  pending(opts: ListOptions = {}): AsyncGenerator<ParkedCall> {
    return paged(opts, (o) => this.pendingPage(o), (p) => p.pending);
  }

  /** One page of the calls waiting for approval, across sessions, newest first. */
  async approvalsPage(opts: ListOptions = {}): Promise<ApprovalPage> {
    return (await this.json<ApprovalPage>({ method: "GET", path: `/v1/approvals${listQuery({ ...opts, status: undefined })}`, signal: opts.signal })).value;
  }

  /** The calls waiting for approval, newest first, page by page. */
  approvals(opts: ListOptions = {}): AsyncGenerator<Approval> {
    return paged(opts, (o) => this.approvalsPage(o), (p) => p.approvals);
  }

  /**
   * Approves or rejects a call waiting for approval. The same decision
   * again answers `already_decided`; refusals are TurndErrors: 409
   * `not_awaiting_approval` or `already_decided`, 410 `approval_expired`,
   * 422 `invalid_arguments` (edited arguments that fail the tool's schema).
   */
  async decide(session: string, turn: string, call: string, d: Decision, signal?: AbortSignal): Promise<DecisionResult> {
    const path = `${turnPath(session, turn)}/calls/${enc(call)}/decision`;
    return (await this.json<DecisionResult>({ method: "POST", path, body: JSON.stringify(d), signal })).value;
  }

  /** Posts a decision to the completion key of a call waiting for approval (the key is the credential). */
  async decideKey(key: string, d: Decision, signal?: AbortSignal): Promise<DecisionResult> {
    return (await this.json<DecisionResult>({ method: "POST", path: completePath(key), body: JSON.stringify(d), noAuth: true, sign: true, signal })).value;
  }

  /** A turn's calls as posted, arguments included. */
  async turnCalls(session: string, turn: string, signal?: AbortSignal): Promise<Call[]> {
    return (await this.json<{ calls: Call[] }>({ method: "GET", path: `${turnPath(session, turn)}/calls`, signal })).value.calls;
  }

  async turn(session: string, turn: string, signal?: AbortSignal): Promise<Turn> {
    return (await this.json<Turn>({ method: "GET", path: turnPath(session, turn), signal })).value;
  }

  /** Holds until the turn settles (completed, failed, cancelled), by long polls of at most 60 s. */
  async await(session: string, turn: string, signal?: AbortSignal): Promise<Turn> {
    for (;;) {
      const { value } = await this.json<Turn>({ method: "GET", path: turnPath(session, turn), headers: { Prefer: "wait=60" }, signal });
      if (settled(value.status)) return value;
    }
  }

  async cancel(session: string, turn: string, signal?: AbortSignal): Promise<Turn> {
    return (await this.json<Turn>({ method: "POST", path: `${turnPath(session, turn)}/cancel`, signal })).value;
  }

  async tools(session?: string, signal?: AbortSignal): Promise<Tool[]> {
    const q = session ? `?session_id=${enc(session)}` : "";
    return (await this.json<{ tools: Tool[] }>({ method: "GET", path: `/v1/tools${q}`, signal })).value.tools;
  }

  async ledgerPage(session: string, after = 0, limit?: number, signal?: AbortSignal): Promise<LedgerPage> {
    const q = new URLSearchParams({ after: String(after) });
    if (limit) q.set("limit", String(limit));
    return (await this.json<LedgerPage>({ method: "GET", path: `${sessionPath(session)}/ledger?${q}`, signal })).value;
  }

  /** The session's ledger lines after `after`, page by page, to the end. */
  async *ledger(session: string, after = 0, signal?: AbortSignal): AsyncGenerator<LedgerLine> {
    for (;;) {
      const page = await this.ledgerPage(session, after, undefined, signal);
      if (page.lines.length === 0) return;
      yield* page.lines;
      after = page.next_after;
    }
  }

  /**
   * The turn's ledger lines as the server streams them (Server-Sent Events),
   * after lastSeq, to its turn_settled line; a dropped stream is resumed
   * with Last-Event-ID.
   */
  async *events(session: string, turn: string, lastSeq = 0, signal?: AbortSignal): AsyncGenerator<LedgerLine> {
    let failures = 0;
    for (;;) {
      const headers: Record<string, string> = { Accept: "text/event-stream" };
      if (lastSeq > 0) headers["Last-Event-ID"] = String(lastSeq);
      const resp = await this.do({ method: "GET", path: `${turnPath(session, turn)}/events`, headers, signal });
      let progressed = false;
      try {
        for await (const line of sseLines(resp.body!)) {
          progressed = true;
          lastSeq = line.seq;
          yield line;
          if (line.kind === "turn_settled") return;
        }
      } catch (e) {
        if (signal?.aborted) throw e;
      } finally {
        await resp.body?.cancel().catch(() => {});
      }
      if (!progressed) {
        // A settled turn whose lines the client has seen closes at once.
        const t = await this.turn(session, turn, signal).catch(() => undefined);
        if (t && settled(t.status)) return;
      }
      if (progressed) failures = 0;
      if (++failures >= this.retry.maxAttempts) throw new Error(`turnd client: the event stream of turn ${turn} ended before turn_settled`);
    }
  }

  /** Delivers a deferred call's output (any JSON value). */
  complete(key: string, output: unknown, signal?: AbortSignal): Promise<DeliveryAck> {
    return this.deliver(key, JSON.stringify({ output: output ?? null }), signal);
  }

  /** Delivers a deferred call's failure. */
  completeError(key: string, code: string, message?: string, signal?: AbortSignal): Promise<DeliveryAck> {
    return this.deliver(key, JSON.stringify({ error: { code, message } }), signal);
  }

  private async deliver(key: string, body: string, signal?: AbortSignal): Promise<DeliveryAck> {
    return (await this.json<DeliveryAck>({ method: "POST", path: completePath(key), body, noAuth: true, sign: true, signal })).value;
  }

  /** Moves the key's heartbeat deadline; answers the key's state. */
  async heartbeat(key: string, signal?: AbortSignal): Promise<CompletionInfo> {
    return (await this.json<CompletionInfo>({ method: "POST", path: `${completePath(key)}/heartbeat`, body: "", noAuth: true, sign: true, signal })).value;
  }

  async completionStatus(key: string, signal?: AbortSignal): Promise<CompletionInfo> {
    return (await this.json<CompletionInfo>({ method: "GET", path: completePath(key), noAuth: true, signal })).value;
  }
}

function providerPath(session: string, format: ProviderFormat, opts: ProviderOptions): string {
  const q = new URLSearchParams({ format });
  if (opts.turnId) q.set("turn_id", opts.turnId);
  if (opts.placeholders) q.set("pending", "placeholder");
  if (opts.mode) q.set("mode", opts.mode);
  if (opts.failurePolicy) q.set("failure_policy", opts.failurePolicy);
  return `${turnsPath(session)}?${q}`;
}

function listQuery(o: ListOptions): string {
  const q = new URLSearchParams();
  if (o.after) q.set("after", o.after);
  if (o.limit && o.limit > 0) q.set("limit", String(o.limit));
  if (o.status) q.set("status", o.status);
  const s = q.toString();
  return s ? `?${s}` : "";
}

/** The items of every page from opts.after on, following next_after. */
async function* paged<P extends { next_after: string }, T>(opts: ListOptions, page: (o: ListOptions) => Promise<P>, items: (p: P) => T[]): AsyncGenerator<T> {
  let o = { ...opts };
  for (;;) {
    const p = await page(o);
    yield* items(p);
    if (!p.next_after) return;
    o = { ...o, after: p.next_after };
  }
}

function prefer(opts: PostOptions): Record<string, string> {
  if (opts.async) return { Prefer: "respond-async" };
  if (opts.waitSeconds && opts.waitSeconds > 0) return { Prefer: `wait=${Math.ceil(opts.waitSeconds)}` };
  return {};
}
