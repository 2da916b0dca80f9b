/** ioredis's own slot function (the same package and version it uses): a key's hash slot on a Redis Cluster. */
declare module 'cluster-key-slot' {
  export default function calculateSlot(key: string | Buffer): number;
}
