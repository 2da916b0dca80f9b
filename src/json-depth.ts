const quote = 0x22;
const backslash = 0x5c;
const openBracket = 0x5b;
const openBrace = 0x7b;
const closeBracket = 0x5d;
const closeBrace = 0x7d;

/**
 * Whether a JSON text nests arrays and objects deeper than `limit`, read
 * without parsing it: brackets are counted outside strings, and each string
 * is skipped with a native search for its closing quote, so a body of long
 * strings costs little more than a memchr over it. Linear in the text; a
 * malformed text gets some answer and is refused by the parse after.
 */
export function jsonNestsDeeperThan(json: Uint8Array, limit: number): boolean {
  const text = Buffer.isBuffer(json) ? json : Buffer.from(json.buffer, json.byteOffset, json.byteLength);
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const byte = text[i];
    if (byte === quote) i = closingQuote(text, i);
    else if (byte === openBracket || byte === openBrace) {
      if (++depth > limit) return true;
    } else if (byte === closeBracket || byte === closeBrace) depth--;
  }
  return false;
}

/** The index of the quote that closes the string opened at `open` (one not escaped by an odd run of backslashes), or the end of the text. */
function closingQuote(text: Buffer, open: number): number {
  let at = open;
  for (;;) {
    at = text.indexOf(quote, at + 1);
    if (at < 0) return text.length;
    let backslashes = 0;
    while (text[at - 1 - backslashes] === backslash) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
}
