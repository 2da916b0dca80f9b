/** FNV-1a 32-bit: stable across processes and versions, so a key always lands on the same shard. */
export function hashKey(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function shardOf(key: string, shards: number): number {
  return hashKey(key) % shards;
}
