/**
 * The notification path of the API-key record store: one subscriber connection per watch, on the store's
 * channel, that survives breaks, notices a half-open connection by a heartbeat, and says when it broke and when
 * it came back.
 */
import type { ApiKeyRecordWatcher } from '@petstore/core';
import { Redis, type Cluster } from 'ioredis';
import { RedisTimeoutError, storeFailure } from './redis-call.js';

/** How often a watch's subscriber connection is sent `PING` (answered in subscriber mode too), in ms. */
export const WATCH_HEARTBEAT_INTERVAL_MS = 1000;
/**
 * How long a heartbeat `PING` may go unanswered, in ms, before the connection counts as broken (half-open: the
 * path stopped forwarding without closing): `onDisconnect`, then a new connection.
 */
export const WATCH_HEARTBEAT_TIMEOUT_MS = 2000;

/** Delay before a new subscriber connection, or another `SUBSCRIBE` after a refusal, in ms: attempt × 100, at most 2000. */
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
 * `autoResubscribe` is off: the watch subscribes itself on every `ready` and handles the answer, where ioredis's
 * own re-subscription would leave a refusal (`NOPERM` after an ACL change) as an unhandled rejection.
 * `undefined` when a cluster knows no node yet.
 */
function newConnection(client: Redis | Cluster): Redis | undefined {
  const options = { lazyConnect: true, enableOfflineQueue: true, autoResubscribe: false };
  if (!client.isCluster) return (client as Redis).duplicate(options);
  const cluster = client as Cluster;
  if (cluster.status === 'wait') cluster.connect().catch(() => {}); // a lazy client: its slot map lists the nodes
  const nodes = cluster.nodes('all');
  const node = nodes[Math.floor(Math.random() * nodes.length)];
  return node?.duplicate({ ...options, retryStrategy: () => null, readOnly: false });
}

/**
 * Subscribes to `channel` on a connection of its own and calls `listener.onChange` with the digests of every
 * message. Resolves once the first subscription is confirmed; rejects, and leaves nothing open, when that takes
 * longer than `callTimeoutMs` (`service_unavailable`) or Redis refuses it.
 *
 * From then on the path is watched: when the connection closes, when a heartbeat `PING` (every
 * {@link WATCH_HEARTBEAT_INTERVAL_MS}) goes unanswered for {@link WATCH_HEARTBEAT_TIMEOUT_MS} (the connection is
 * then dropped and a new one made), or when Redis refuses a later `SUBSCRIBE` (retried with backoff), it calls
 * `listener.onDisconnect(error)`, once per break. Once Redis confirms a subscription again it calls
 * `listener.onReconnect()`: changes published during the break were not heard.
 */
export function watchChannel(
  client: Redis | Cluster,
  channel: string,
  callTimeoutMs: number,
  listener: ApiKeyRecordWatcher,
): Promise<{ close(): Promise<void> }> {
  let closed = false;
  let listening = false; // a subscription was confirmed once: later confirmations are reconnections
  let disconnected = false; // onDisconnect was told since the last confirmed subscription
  let attempt = 0;
  let connection: Redis | undefined;
  let retryTimer: NodeJS.Timeout | undefined; // a new connection, or another SUBSCRIBE, after backoff
  let heartbeatTimer: NodeJS.Timeout | undefined; // the next PING, or the deadline of the one in flight
  let started: (value: { close(): Promise<void> }) => void = () => {};
  let failed: (error: unknown) => void = () => {};
  const ready = new Promise<{ close(): Promise<void> }>((resolve, reject) => ((started = resolve), (failed = reject)));

  const handle = {
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearTimeout(retryTimer);
      clearTimeout(heartbeatTimer);
      const last = connection;
      connection = undefined;
      if (last === undefined) return;
      if (last.status === 'ready') await last.quit().catch(() => last.disconnect());
      else last.disconnect();
    },
  };

  /** Calls the listener; the contract says it does not throw, and one that does must not break this watch. */
  function tell(call: () => void): void {
    try {
      call();
    } catch {
      // Ignored, as above.
    }
  }

  /** The path broke (or cannot be trusted): tells the listener once per break, and only once it was listening. */
  function disconnect(error: Error): void {
    if (closed || !listening || disconnected) return;
    disconnected = true;
    tell(() => listener.onDisconnect(error));
  }

  function deliver(from: Redis, messageChannel: string, message: string): void {
    if (from !== connection || messageChannel !== channel) return;
    const digests = digestsOfMessage(message);
    if (digests.length === 0) return;
    tell(() => listener.onChange(digests));
  }

  function subscribeOn(subscriber: Redis): void {
    subscriber.subscribe(channel).then(
      () => {
        if (closed || subscriber !== connection) return;
        attempt = 0;
        if (!listening) {
          listening = true;
          scheduleHeartbeat();
          started(handle);
        } else if (disconnected) {
          disconnected = false;
          tell(() => listener.onReconnect());
        }
      },
      (error: unknown) => {
        if (closed || subscriber !== connection) return;
        // A refusal before the first confirmation (e.g. an ACL without this channel) fails the watch.
        if (!listening) {
          fail(error);
          return;
        }
        // Later: refused (an ACL changed since) or cut by a break. A break's next 'ready' subscribes again; a
        // refusal on a live connection is asked again after backoff, until Redis allows it.
        disconnect(new Error(`Redis refused the API-key record store's subscription to ${channel}`, { cause: error }));
        if (subscriber.status !== 'ready') return;
        clearTimeout(retryTimer);
        attempt += 1;
        retryTimer = setTimeout(() => {
          if (!closed && subscriber === connection && subscriber.status === 'ready') subscribeOn(subscriber);
        }, backoffMs(attempt));
        retryTimer.unref();
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
    let lastError: Error | undefined;
    // Every failure also shows as close/end (and as the deadline of the first subscribe): here it is only the cause.
    subscriber.on('error', (error: Error) => {
      lastError = error;
    });
    subscriber.on('message', (messageChannel: string, message: string) => deliver(subscriber, messageChannel, message));
    subscriber.on('ready', () => {
      if (!closed && subscriber === connection) subscribeOn(subscriber);
    });
    subscriber.on('close', () => {
      if (subscriber !== connection) return;
      disconnect(new Error("The API-key record store's subscriber connection closed", { cause: lastError }));
    });
    subscriber.on('end', () => {
      if (closed || subscriber !== connection) return;
      connection = undefined;
      reconnectLater();
    });
    subscriber.connect().catch(() => {}); // a failed connect retries or ends, seen above
  }

  function reconnectLater(): void {
    clearTimeout(retryTimer);
    attempt += 1;
    retryTimer = setTimeout(connect, backoffMs(attempt));
    retryTimer.unref();
  }

  /** Lets `subscriber` go at once (its later events are ignored) and makes a new connection. */
  function replace(subscriber: Redis): void {
    if (closed || subscriber !== connection) return;
    connection = undefined;
    subscriber.disconnect();
    reconnectLater();
  }

  function scheduleHeartbeat(): void {
    heartbeatTimer = setTimeout(heartbeat, WATCH_HEARTBEAT_INTERVAL_MS);
    heartbeatTimer.unref();
  }

  /**
   * One `PING` on the current connection when it is ready (one that is not is reconnecting: its close was told).
   * An answer, even an error reply, proves the path; no answer within the bound is a half-open connection.
   */
  function heartbeat(): void {
    const subscriber = connection;
    if (closed) return;
    if (subscriber === undefined || subscriber.status !== 'ready') {
      scheduleHeartbeat();
      return;
    }
    let settled = false;
    const settle = (broken: Error | undefined) => {
      if (settled || closed) return;
      settled = true;
      clearTimeout(heartbeatTimer);
      if (broken !== undefined && subscriber === connection) {
        disconnect(broken);
        replace(subscriber);
      }
      scheduleHeartbeat();
    };
    heartbeatTimer = setTimeout(
      () => settle(new Error(`The API-key record store's subscriber connection did not answer PING within ${WATCH_HEARTBEAT_TIMEOUT_MS} ms`)),
      WATCH_HEARTBEAT_TIMEOUT_MS,
    );
    heartbeatTimer.unref();
    subscriber.ping().then(
      () => settle(undefined),
      (error: unknown) => {
        // A reply error is an answer; a rejection by the client itself (its commandTimeout) on a connection
        // still ready is not. A connection no longer ready was closed, and told so.
        const answered = (error as { name?: unknown }).name === 'ReplyError' || subscriber.status !== 'ready';
        settle(answered ? undefined : new Error("The API-key record store's subscriber connection did not answer PING", { cause: error }));
      },
    );
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
