// Signing the requests a client sends as turnd signs its webhooks, for a
// tool server that checks them.

import { newTurnId } from "./ids.js";
import { utf8 } from "./body.js";

// Standard Webhooks: HMAC-SHA256 over "id.timestamp.body", sent as
// "v1,<base64>". The secret's forms are the server's: "whsec_" + base64,
// bare padded base64 of at least 24 bytes, or a raw string of at least 32.

function fromBase64(s: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return undefined;
  try {
    const bin = atob(s.padEnd(Math.ceil(s.length / 4) * 4, "="));
    return Uint8Array.from(bin, (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
}

function signingKeyBytes(secret: string): Uint8Array {
  secret = secret.trim();
  if (secret.startsWith("whsec_")) {
    const key = fromBase64(secret.slice(6));
    if (!key || key.length < 24) throw new Error("turnd client: the signing secret after whsec_ must be base64 of at least 24 bytes");
    return key;
  }
  if (secret.length % 4 === 0) {
    const key = fromBase64(secret);
    if (key && key.length >= 24) return key;
  }
  const raw = utf8.encode(secret);
  if (raw.length < 32) throw new Error("turnd client: a signing secret is whsec_ + base64 of at least 24 bytes, or at least 32 bytes of text");
  return raw;
}

export async function importSigningKey(secret: string): Promise<CryptoKey> {
  const bytes = signingKeyBytes(secret);
  return crypto.subtle.importKey("raw", bytes as BufferSource, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

export async function signHeaders(key: CryptoKey, body: string): Promise<Record<string, string>> {
  const id = "msg_" + newTurnId().slice(5);
  const ts = String(Math.floor(Date.now() / 1000));
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, utf8.encode(`${id}.${ts}.${body}`)));
  let bin = "";
  for (const b of mac) bin += String.fromCharCode(b);
  return { "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": `v1,${btoa(bin)}` };
}
