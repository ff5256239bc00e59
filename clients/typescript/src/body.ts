// Request and response bodies of streamed posts: the chunks of a stream
// encoded as NDJSON, raw bytes or an SDK's SSE events, pulled or pushed into
// the body fetch sends, and the SSE ledger lines a watch reads.

import type { LedgerLine, ProviderFormat, TurnStreamSource } from "./index.js";

export const utf8 = new TextEncoder();

export function rawChunk(c: unknown): Uint8Array {
  if (c instanceof Uint8Array) return c;
  if (typeof c === "string") return utf8.encode(c);
  throw new TypeError(`turnd client: a stream chunk must be a string or a Uint8Array, not ${typeof c}`);
}

export function ndjsonLine(c: unknown): Uint8Array {
  return c instanceof Uint8Array || typeof c === "string" ? rawChunk(c) : utf8.encode(JSON.stringify(c) + "\n");
}

/** An SDK event as the API sent it: `event: type` (not for openai.chat) and `data: json`. */
export function sseEvent(format: ProviderFormat, ev: unknown): Uint8Array {
  if (ev instanceof Uint8Array || typeof ev === "string") return rawChunk(ev);
  const type = (ev as { type?: unknown } | null)?.type;
  const name = format !== "openai.chat" && typeof type === "string" ? `event: ${type}\n` : "";
  return utf8.encode(`${name}data: ${JSON.stringify(ev)}\n\n`);
}

/** A request body of the source's chunks, each encoded, read as fetch sends it. */
export function bodyOf(source: TurnStreamSource, encode: (c: unknown) => Uint8Array): ReadableStream<Uint8Array> {
  if (source instanceof ReadableStream && encode === rawChunk) return source as ReadableStream<Uint8Array>;
  const it = source instanceof ReadableStream ? readerIterable(source) : (source as AsyncIterable<unknown> | Iterable<unknown>);
  return eventsOf(it, encode, "");
}

async function* readerIterable<T>(rs: ReadableStream<T>): AsyncGenerator<T> {
  const reader = rs.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/** A pull-based body: each item encoded, then end (if any) after a clean end. */
export function eventsOf(items: AsyncIterable<unknown> | Iterable<unknown>, encode: (c: unknown) => Uint8Array, end: string): ReadableStream<Uint8Array> {
  let it: AsyncIterator<unknown> | Iterator<unknown> | undefined;
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      it ??= Symbol.asyncIterator in items ? (items as AsyncIterable<unknown>)[Symbol.asyncIterator]() : (items as Iterable<unknown>)[Symbol.iterator]();
      const { value, done } = await it.next();
      if (done) {
        if (end) ctrl.enqueue(utf8.encode(end));
        ctrl.close();
      } else ctrl.enqueue(encode(value));
    },
    async cancel() {
      await it?.return?.();
    },
  });
}

/** A push-based body: written as the caller reads a teed iterable. */
export class Pipe {
  private ctrl!: ReadableStreamDefaultController<Uint8Array>;
  private open = true;
  readonly readable = new ReadableStream<Uint8Array>({ start: (c) => void (this.ctrl = c) });

  write(b: Uint8Array | string) {
    if (!this.open) return;
    try {
      this.ctrl.enqueue(typeof b === "string" ? utf8.encode(b) : b);
    } catch {
      this.open = false; // turnd stopped reading: the caller goes on
    }
  }
  close() {
    if (this.open) {
      this.open = false;
      try {
        this.ctrl.close();
      } catch {}
    }
  }
  fail(e: unknown) {
    if (this.open) {
      this.open = false;
      try {
        this.ctrl.error(e);
      } catch {}
    }
  }
  dead() {
    this.open = false;
  }
}

/** Parses an SSE body into the LedgerLines of its events. */
export async function* sseLines(body: ReadableStream<Uint8Array>): AsyncGenerator<LedgerLine> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let data: string[] = [];
  let event = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      let line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (line === "") {
        // call_progress events (asked for with ?progress=true) are not ledger lines.
        if (data.length > 0 && event !== "call_progress") yield JSON.parse(data.join("\n")) as LedgerLine;
        data = [];
        event = "";
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let v = colon < 0 ? "" : line.slice(colon + 1);
      if (v.startsWith(" ")) v = v.slice(1);
      if (field === "data") data.push(v);
      else if (field === "event") event = v;
    }
  }
}
