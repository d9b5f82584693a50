/**
 * Graceful shutdown of the example servers. On SIGTERM or SIGINT a server stops accepting connections,
 * answers the requests it has already begun (their connections then close), closes idle keep-alive
 * connections, releases its storage (the Redis client), then exits 0. A second signal, or `timeoutMs`
 * without having finished, exits 1 at once.
 */
import type { Server, ServerResponse } from 'node:http';
import { positiveMs } from './config.js';

/** Default of `SHUTDOWN_TIMEOUT_MS`: how long a shutdown may wait for requests in flight, in ms. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 10_000;

/**
 * Signals closer than this to the first one count as that first one, in ms. One Ctrl-C reaches the server
 * several times: the terminal signals every process of the foreground group, and npm and
 * `scripts/start-example.mjs` forward the signal they got as well.
 */
export const REPEATED_SIGNAL_MS = 500;

/**
 * Reads `SHUTDOWN_TIMEOUT_MS` (default 10,000 ms), as the other `*_MS` variables are read.
 * @throws Error naming the variable when it is set but not a positive whole number of milliseconds.
 */
export function readShutdownTimeoutMs(env: NodeJS.ProcessEnv = process.env): number {
  return positiveMs(env, 'SHUTDOWN_TIMEOUT_MS', DEFAULT_SHUTDOWN_TIMEOUT_MS);
}

/** The requests a Node HTTP server is answering, and how to close it without cutting them short. */
export interface RequestsInFlight {
  /** How many requests have begun and not yet been answered. */
  count(): number;
  /**
   * Stops accepting connections (synchronously: a connection attempted after this call is refused), closes
   * idle keep-alive connections, and lets every request already received be answered — its answer carries
   * `Connection: close` when its headers were not sent yet, and its connection is closed once it is answered.
   * Resolves when the server has no connection left.
   */
  close(): Promise<void>;
}

/**
 * Starts counting the requests `server` answers. Call it before the server takes connections (a Fastify
 * app's `app.server`, or what Express's `app.listen` returns).
 */
export function trackRequests(server: Server): RequestsInFlight {
  const responses = new Set<ServerResponse>();
  let closing = false;
  // Prepended, so it runs before the framework's own listener can answer the request.
  server.prependListener('request', (_request, response: ServerResponse) => {
    responses.add(response);
    if (closing) closeAfterAnswer(response);
    response.once('close', () => {
      responses.delete(response);
      // Its connection is idle now (or closing): close it rather than keep it alive.
      if (closing) server.closeIdleConnections();
    });
  });
  return {
    count: () => responses.size,
    close: () =>
      new Promise<void>((resolve, reject) => {
        closing = true;
        server.close((error) => (error ? reject(error) : resolve()));
        for (const response of responses) closeAfterAnswer(response);
        server.closeIdleConnections();
      }),
  };
}

function closeAfterAnswer(response: ServerResponse): void {
  if (!response.headersSent) response.setHeader('connection', 'close');
}

/** What {@link exitGracefullyOnSignals} needs; the defaults are this process's. */
export interface ShutdownOptions {
  /** Closes everything the server holds; its synchronous part must stop accepting connections. */
  stop(): Promise<void>;
  /** Give up waiting for `stop` after this many ms, and exit 1. */
  timeoutMs: number;
  /** Tells how many requests are in flight, for the shutdown message. */
  inFlight?: () => number;
  signals?: Pick<NodeJS.EventEmitter, 'on'>;
  exit?: (code: number) => void;
  log?: (message: string) => void;
  warn?: (message: string) => void;
  now?: () => number;
}

/**
 * On the first SIGTERM or SIGINT, runs `stop` and exits 0 once it has resolved (1 if it rejects). A signal
 * that comes {@link REPEATED_SIGNAL_MS} or more after the first, or `timeoutMs` without `stop` having
 * resolved, exits 1 at once.
 */
export function exitGracefullyOnSignals(options: ShutdownOptions): void {
  const signals = options.signals ?? process;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const log = options.log ?? ((message: string) => console.log(message));
  const warn = options.warn ?? ((message: string) => console.error(message));
  const now = options.now ?? Date.now;
  let firstSignalAt: number | undefined;
  let exited = false;
  const exitOnce = (code: number) => {
    if (exited) return;
    exited = true;
    exit(code);
  };

  const onSignal = (signal: NodeJS.Signals) => {
    if (exited) return;
    if (firstSignalAt !== undefined) {
      if (now() - firstSignalAt < REPEATED_SIGNAL_MS) return; // the same Ctrl-C, delivered once more
      warn(`${signal} again: exiting without waiting for requests in flight`);
      exitOnce(1);
      return;
    }
    firstSignalAt = now();
    const timer = setTimeout(() => {
      const left = options.inFlight ? ` with ${options.inFlight()} request(s) in flight` : '';
      warn(`shutdown not finished after ${options.timeoutMs} ms: exiting${left}`);
      exitOnce(1);
    }, options.timeoutMs);
    let stopped: Promise<void>;
    try {
      stopped = options.stop();
    } catch (error) {
      stopped = Promise.reject(error);
    }
    const inFlight = options.inFlight ? `, answering ${options.inFlight()} request(s) in flight` : '';
    log(`${signal}: shutting down — no new connections${inFlight}; a second signal or ${options.timeoutMs} ms forces exit`);
    stopped.then(
      () => {
        clearTimeout(timer);
        log('shut down');
        exitOnce(0);
      },
      (error: unknown) => {
        clearTimeout(timer);
        warn(`shutdown failed: ${error instanceof Error ? error.message : String(error)}`);
        exitOnce(1);
      },
    );
  };
  signals.on('SIGINT', onSignal);
  signals.on('SIGTERM', onSignal);
}
