/** Types of `cluster-key-slot` (ioredis's own dependency; it ships none): the Redis Cluster hash slot of a key. */
declare module 'cluster-key-slot' {
  /** The hash slot (0–16383) of `key`, honouring a `{hash tag}` as Redis does. */
  export default function calculateSlot(key: string | Buffer): number;
}
