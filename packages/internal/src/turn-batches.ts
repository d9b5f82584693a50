/** Options of {@link createTurnBatches}. */
export interface TurnBatchesOptions {
  /**
   * While a call of `send` is unsettled (the promise it returned), a batch that is not full waits, taking the items
   * of later turns too, and is sent once no call is (a full batch is sent at once all the same). Off: every turn's
   * batch is sent at the end of its turn.
   */
  holdWhileSending?: boolean;
}

/**
 * Batches the items added within one turn of the event loop: one batch per `group` (a Redis Cluster hash slot,
 * say), handed to `send` at the end of the turn (`setImmediate`, as ioredis's `enableAutoPipelining` waits, so
 * the requests read in one poll phase share a call) or at once when it holds `maxBatchSize` items; with
 * `holdWhileSending`, a batch that is not full waits for the calls of `send` in flight. Under fake timers that fake
 * `setImmediate`, advance them for a batch to be sent.
 * @returns `add(item, group = 0)`
 */
export function createTurnBatches<T>(
  maxBatchSize: number,
  send: (batch: T[]) => void | Promise<unknown>,
  options: TurnBatchesOptions = {},
): (item: T, group?: number) => void {
  const waiting = new Map<number, T[]>();
  let scheduled = false;
  /** Calls of `send` not yet settled (counted with `holdWhileSending` only). */
  let sending = 0;
  const sendOne = (batch: T[]) => {
    const sent = send(batch);
    if (options.holdWhileSending === true && sent !== undefined) {
      sending++;
      void sent.then(settled, settled);
    }
  };
  const settled = () => {
    sending--;
    if (sending === 0 && !scheduled && waiting.size > 0) sendAll();
  };
  const sendAll = () => {
    scheduled = false;
    if (sending > 0) return; // sent when the last call in flight settles
    const batches = [...waiting.values()];
    waiting.clear();
    for (const batch of batches) sendOne(batch);
  };
  return (item, group = 0) => {
    let batch = waiting.get(group);
    if (batch === undefined) waiting.set(group, (batch = []));
    batch.push(item);
    if (batch.length >= maxBatchSize) {
      waiting.delete(group);
      sendOne(batch);
    } else if (!scheduled) {
      scheduled = true;
      setImmediate(sendAll);
    }
  };
}
