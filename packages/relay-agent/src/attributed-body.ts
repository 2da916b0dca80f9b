import { StringDecoder } from 'node:string_decoder';

/**
 * `message.attributedBody` is an NSAttributedString archived in Apple's
 * "typedstream" format. Since macOS Ventura, `message.text` is often NULL and
 * this blob is the only copy of the body. We do not parse the whole archive:
 * the string is the first `NSString` object, stored as the class name, a few
 * bytes of object header, the `+` (0x2B) type tag and a length-prefixed UTF-8
 * string. Lengths use typedstream's integer encoding: one byte for 0..127,
 * 0x81 then 2 bytes little-endian, or 0x82 then 4 bytes little-endian.
 */
const marker = Buffer.from('NSString', 'latin1');
const stringTag = 0x2b;
const int16Tag = 0x81;
const int32Tag = 0x82;
/** How far after the class name the `+` tag may sit (real archives: 5 bytes). */
const maxHeaderBytes = 16;

/**
 * The body as read. Some apps and extensions write archives whose declared
 * string length runs past the end of the blob: what is there is kept, up to
 * its last whole UTF-8 character, and `cut` says so.
 */
export interface AttributedBody {
  text: string;
  /** Present when the blob ends inside the string: the length the archive declares, and the bytes of it the blob holds. */
  cut?: { declaredBytes: number; heldBytes: number };
}

export function decodeAttributedBody(blob: Uint8Array | null | undefined): string | undefined {
  return readAttributedBody(blob)?.text;
}

export function readAttributedBody(blob: Uint8Array | null | undefined): AttributedBody | undefined {
  if (!blob || blob.length === 0) return undefined;
  const buf = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
  let from = 0;
  for (;;) {
    const at = buf.indexOf(marker, from);
    if (at < 0) return undefined;
    const body = readStringAfter(buf, at + marker.length);
    // A cut string runs to the end of the blob: any later marker is inside it, so the search ends here.
    if (body !== undefined) return body;
    from = at + 1;
  }
}

/** The string after a class name: a whole one if any `+` tag in the header leads to one, else the first cut one. */
function readStringAfter(buf: Buffer, start: number): AttributedBody | undefined {
  const end = Math.min(buf.length, start + maxHeaderBytes);
  let cut: AttributedBody | undefined;
  for (let i = start; i < end; i++) {
    if (buf[i] !== stringTag) continue;
    const parsed = readLength(buf, i + 1);
    if (!parsed) continue;
    const [length, bodyStart] = parsed;
    if (bodyStart + length <= buf.length) return { text: buf.toString('utf8', bodyStart, bodyStart + length) };
    cut ??= readCut(buf.subarray(bodyStart), length);
  }
  return cut;
}

/**
 * The whole characters of a string cut at the end of the blob: the decoder
 * holds back a trailing partial UTF-8 sequence instead of answering U+FFFD.
 */
function readCut(held: Buffer, declaredBytes: number): AttributedBody {
  return { text: new StringDecoder('utf8').write(held), cut: { declaredBytes, heldBytes: held.length } };
}

function readLength(buf: Buffer, at: number): [length: number, bodyStart: number] | undefined {
  const first = buf[at];
  if (first === undefined) return undefined;
  if (first === int16Tag) return at + 3 <= buf.length ? [buf.readUInt16LE(at + 1), at + 3] : undefined;
  if (first === int32Tag) return at + 5 <= buf.length ? [buf.readUInt32LE(at + 1), at + 5] : undefined;
  if (first < 0x80) return [first, at + 1];
  return undefined;
}

/**
 * Builds a minimal archive the way Messages lays one out, so the simulator can
 * store bodies with `text` NULL and the decoder is exercised on the same bytes.
 */
export function encodeAttributedBody(text: string): Buffer {
  const utf8 = Buffer.from(text, 'utf8');
  let length: Buffer;
  if (utf8.length < 0x80) length = Buffer.from([utf8.length]);
  else if (utf8.length <= 0xffff) {
    length = Buffer.alloc(3);
    length[0] = int16Tag;
    length.writeUInt16LE(utf8.length, 1);
  } else {
    length = Buffer.alloc(5);
    length[0] = int32Tag;
    length.writeUInt32LE(utf8.length, 1);
  }
  return Buffer.concat([
    Buffer.from([0x04, 0x0b]),
    Buffer.from('streamtyped', 'latin1'),
    Buffer.from([0x81, 0xe8, 0x03, 0x84, 0x01, 0x40, 0x84, 0x84, 0x84, 0x12]),
    Buffer.from('NSAttributedString', 'latin1'),
    Buffer.from([0x00, 0x84, 0x84, 0x08]),
    Buffer.from('NSObject', 'latin1'),
    Buffer.from([0x00, 0x85, 0x92, 0x84, 0x84, 0x84, 0x08]),
    marker,
    Buffer.from([0x01, 0x94, 0x84, 0x01, stringTag]),
    length,
    utf8,
    Buffer.from([0x86, 0x84, 0x02, 0x69, 0x49, 0x01]),
  ]);
}
