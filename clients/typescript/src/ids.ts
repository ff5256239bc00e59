// Ids a client makes itself.

/** A fresh turn id: "turn_" and 26 base32 characters (128 random bits). */
export function newTurnId(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  const bytes = crypto.getRandomValues(new Uint8Array(26));
  let s = "turn_";
  for (const b of bytes) s += alphabet[b & 31];
  return s;
}
