/**
 * Batches the items added within one turn of the event loop: one batch per `group` (a Redis Cluster hash slot,
 * say), handed to `send` at the end of the turn (`setImmediate`, as ioredis's `enableAutoPipelining` waits, so
 * the requests read in one poll phase share a call) or at once when it holds `maxBatchSize` items. Under fake
 * timers that fake `setImmediate`, advance them for a batch to be sent.
 * @returns `add(item, group = 0)`
 */
export function createTurnBatches<T>(maxBatchSize: number, send: (batch: T[]) => void): (item: T, group?: number) => void {
  const waiting = new Map<number, T[]>();
  let scheduled = false;
  const sendAll = () => {
    scheduled = false;
    const batches = [...waiting.values()];
    waiting.clear();
    for (const batch of batches) send(batch);
  };
  return (item, group = 0) => {
    let batch = waiting.get(group);
    if (batch === undefined) waiting.set(group, (batch = []));
    batch.push(item);
    if (batch.length >= maxBatchSize) {
      waiting.delete(group);
      send(batch);
    } else if (!scheduled) {
      scheduled = true;
      setImmediate(sendAll);
    }
  };
}
