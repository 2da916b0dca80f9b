/**
 * /favicon.ico for clients that ask for it by that name (the pages name the
 * SVG mark): the same mark drawn at 32 × 32 into an ICO holding one 32-bit
 * bitmap, made once at start from a few shapes rather than committed as a
 * binary.
 */
const size = 32;
const blue = [0xad, 0x5c, 0x0b, 0xff]; // BGRA of #0b5cad
const white = [0xff, 0xff, 0xff, 0xff];

function inRoundedRect(x: number, y: number, left: number, top: number, right: number, bottom: number, r: number) {
  if (x < left || x > right || y < top || y > bottom) return false;
  const cx = Math.min(Math.max(x, left + r), right - r);
  const cy = Math.min(Math.max(y, top + r), bottom - r);
  return (x - cx) ** 2 + (y - cy) ** 2 <= r * r;
}

/** The colour at a pixel's centre: the rounded square, the bubble with its tail, the arrow through it. */
function pixel(px: number, py: number): number[] | null {
  const x = px + 0.5;
  const y = py + 0.5;
  if (!inRoundedRect(x, y, 1, 1, 31, 31, 8)) return null;
  const arrow =
    (Math.abs(y - 14) <= 1 && x >= 11.5 && x <= 20.5) ||
    (Math.abs(x - y - 3) <= 1.2 && x >= 16.5 && x <= 20.5) ||
    (Math.abs(x + y - 37) <= 1.2 && x >= 16.5 && x <= 20.5);
  const bubble =
    inRoundedRect(x, y, 8, 8, 24, 20, 2.5) || (y >= 19 && y <= 24 && x >= 9.5 && x <= 14 && x - 9.5 <= (24 - y) * 0.9);
  return bubble && !arrow ? white : blue;
}

export function faviconIco(): Buffer {
  const pixels = Buffer.alloc(size * size * 4);
  // Bottom-up rows, as a bitmap stores them.
  for (let row = 0; row < size; row++)
    for (let x = 0; x < size; x++) {
      const color = pixel(x, size - 1 - row);
      if (color) pixels.set(color, (row * size + x) * 4);
    }
  const mask = Buffer.alloc(size * 4); // every pixel drawn by its alpha; the AND mask stays clear
  const header = Buffer.alloc(40);
  header.writeUInt32LE(40, 0);
  header.writeInt32LE(size, 4);
  header.writeInt32LE(size * 2, 8); // the colour bitmap and the mask, stacked
  header.writeUInt16LE(1, 12);
  header.writeUInt16LE(32, 14);
  header.writeUInt32LE(pixels.length + mask.length, 20);
  const image = Buffer.concat([header, pixels, mask]);
  const dir = Buffer.alloc(6 + 16);
  dir.writeUInt16LE(1, 2); // type: icon
  dir.writeUInt16LE(1, 4); // one image
  dir.writeUInt8(size, 6);
  dir.writeUInt8(size, 7);
  dir.writeUInt16LE(1, 10);
  dir.writeUInt16LE(32, 12);
  dir.writeUInt32LE(image.length, 14);
  dir.writeUInt32LE(dir.length, 18);
  return Buffer.concat([dir, image]);
}
