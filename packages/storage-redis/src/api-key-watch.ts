/**
 * The notification path of the API-key record store: one subscriber connection per watch, on the store's
 * channel, that survives breaks and says when it came back.
 */
import type { ApiKeyRecordWatcher } from '@petstore/core';
import { Redis, type Cluster } from 'ioredis';
import { RedisTimeoutError, storeFailure } from './redis-call.js';

/** Delay before a new subscriber connection after one ended for good, in ms: attempt × 100, at most 2000. */
function backoffMs(attempt: number): number {
  return Math.min(attempt * 100, 2000);
}

/** A message on the channel: lowercase hex digests joined by commas. Anything else is skipped. */
export function digestsOfMessage(message: string): Uint8Array[] {
  const digests: Uint8Array[] = [];
  // At most 3 digests per message from this store's scripts; a foreign message is read only this far.
  for (const hex of message.split(',', 8)) {
    if (/^[0-9a-f]{64}$/.test(hex)) digests.push(new Uint8Array(Buffer.from(hex, 'hex')));
  }
  return digests;
}

/**
 * A new subscriber connection, not yet connected (`lazyConnect`), that ends for good when it cannot be kept:
 * on a `Redis` client a duplicate of it (same server and options; ioredis reconnects it as the client's
 * `retryStrategy` says and emits `ready` again), on a `Cluster` a plain connection to one of its nodes, picked
 * at random, which ends at its first break (as ioredis's own cluster subscriber does): the next one may then be
 * another node. Redis forwards a `PUBLISH` to every node of a cluster, so any node hears every change.
 * `undefined` when a cluster knows no node yet.
 */
function newConnection(client: Redis | Cluster): Redis | undefined {
  if (!client.isCluster) return (client as Redis).duplicate({ lazyConnect: true, enableOfflineQueue: true });
  const cluster = client as Cluster;
  if (cluster.status === 'wait') cluster.connect().catch(() => {}); // a lazy client: its slot map lists the nodes
  const nodes = cluster.nodes('all');
  const node = nodes[Math.floor(Math.random() * nodes.length)];
  return node?.duplicate({ lazyConnect: true, enableOfflineQueue: true, retryStrategy: () => null, readOnly: false });
}

/**
 * Subscribes to `channel` on a connection of its own and calls `listener.onChange` with the digests of every
 * message. After a break (the connection closed, or ended and a new one was made) it subscribes again once the
 * connection is ready and, when Redis has confirmed the subscription, calls `listener.onReconnect()`: changes
 * published during the break were not heard. Resolves once the first subscription is confirmed; rejects, and
 * leaves nothing open, when that takes longer than `callTimeoutMs` (`service_unavailable`) or Redis refuses it.
 */
export function watchChannel(
  client: Redis | Cluster,
  channel: string,
  callTimeoutMs: number,
  listener: ApiKeyRecordWatcher,
): Promise<{ close(): Promise<void> }> {
  let closed = false;
  let listening = false; // a subscription was confirmed once: later confirmations are reconnections
  let broken = false; // the current connection closed since its last confirmed subscription
  let attempt = 0;
  let connection: Redis | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let started: (value: { close(): Promise<void> }) => void = () => {};
  let failed: (error: unknown) => void = () => {};
  const ready = new Promise<{ close(): Promise<void> }>((resolve, reject) => ((started = resolve), (failed = reject)));

  const handle = {
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearTimeout(retryTimer);
      const last = connection;
      connection = undefined;
      if (last === undefined) return;
      if (last.status === 'ready') await last.quit().catch(() => last.disconnect());
      else last.disconnect();
    },
  };

  function deliver(from: Redis, messageChannel: string, message: string): void {
    if (from !== connection || messageChannel !== channel) return;
    const digests = digestsOfMessage(message);
    if (digests.length === 0) return;
    try {
      listener.onChange(digests);
    } catch {
      // The contract: the listener does not throw. One that does must not break the connection's reader.
    }
  }

  function subscribeOn(subscriber: Redis): void {
    subscriber.subscribe(channel).then(
      () => {
        if (closed || subscriber !== connection) return;
        attempt = 0;
        if (!listening) {
          listening = true;
          started(handle);
        } else if (broken) {
          broken = false;
          try {
            listener.onReconnect();
          } catch {
            // As above.
          }
        }
      },
      (error: unknown) => {
        // A refusal before the first confirmation (e.g. an ACL without this channel) fails the watch; later
        // ones are a connection that broke again, which its next 'ready' retries.
        if (!listening && !closed) fail(error);
      },
    );
  }

  function connect(): void {
    retryTimer = undefined;
    if (closed) return;
    const subscriber = newConnection(client);
    if (subscriber === undefined) {
      reconnectLater();
      return;
    }
    connection = subscriber;
    subscriber.on('error', () => {}); // every failure shows as close/end, and as the deadline of the first subscribe
    subscriber.on('message', (messageChannel: string, message: string) => deliver(subscriber, messageChannel, message));
    subscriber.on('ready', () => {
      if (!closed && subscriber === connection) subscribeOn(subscriber);
    });
    subscriber.on('close', () => {
      if (listening) broken = true;
    });
    subscriber.on('end', () => {
      if (closed || subscriber !== connection) return;
      if (listening) broken = true;
      connection = undefined;
      reconnectLater();
    });
    subscriber.connect().catch(() => {}); // a failed connect retries or ends, seen above
  }

  function reconnectLater(): void {
    attempt += 1;
    retryTimer = setTimeout(connect, backoffMs(attempt));
    retryTimer.unref();
  }

  function fail(error: unknown): void {
    void handle.close();
    failed(storeFailure(error, 'watch', 'API-key record store'));
  }

  const deadline = setTimeout(() => {
    if (!listening) fail(new RedisTimeoutError(callTimeoutMs));
  }, callTimeoutMs);
  deadline.unref();
  void ready.then(
    () => clearTimeout(deadline),
    () => clearTimeout(deadline),
  );
  connect();
  return ready;
}
