/**
 * A raw HTTP/1.1 client for tests, on `node:net`: it writes exactly the bytes it is given (malformed request
 * lines, duplicated headers, pipelined requests, bodies cut short, in one write or several) and reads the
 * server's answers with http-parser-js in response mode. Unlike `fetch`, nothing is normalised on the way
 * out, and the test sees whether the server closed the connection.
 *
 * Nothing here can hang a test: every wait ends after a timeout (10 s by default) and reports what it got. The
 * timeouts only end a wait that has failed — a test waits for the event itself (an answer, a close) and never
 * for time to pass — so they are generous enough for a busy machine.
 */
import { connect, type Socket } from 'node:net';
import { HTTPParser } from 'http-parser-js';
import type { Answer } from './http-client.js';

/** One answer as read from the socket. */
export interface RawAnswer {
  status: number;
  statusMessage: string;
  /** HTTP version of the status line, e.g. `1.1`. */
  version: string;
  /** Header values by lower-case name; a header sent several times is the array of its values, in order. */
  headers: Record<string, string | string[]>;
  /** The body as UTF-8 text ('' when there is none, and always for an answer to HEAD). */
  body: string;
}

/** What one connection saw. */
export interface RawExchange {
  /** Final (non-1xx) answers, in order. */
  answers: RawAnswer[];
  /** Interim (1xx) answers, in order. */
  interim: RawAnswer[];
  /** True when the server ended or reset the connection. */
  closed: boolean;
  /** True when the wait ended by timeout rather than by what it waited for. */
  timedOut: boolean;
  /** A socket error (e.g. `ECONNRESET` after the server dropped the connection), if any. */
  socketError: string | undefined;
  /** Why the answers could not be parsed, if they could not. */
  parseError: string | undefined;
}

/** Where to connect: a server origin `http://127.0.0.1:<port>`. */
export type Origin = string;

/** Options of {@link RawConnection.open}. */
export interface ConnectOptions {
  /**
   * Local (source) address to bind, e.g. `127.0.3.7`: on Linux any address of 127.0.0.0/8 reaches a server
   * listening on 127.0.0.1, so the server sees a distinct client address per connection.
   */
  localAddress?: string;
  /** Longest wait for the connection, in ms. Default {@link DEFAULT_TIMEOUT_MS}. */
  timeoutMs?: number;
}

/** Default longest wait of every operation, in ms. */
export const DEFAULT_TIMEOUT_MS = 10_000;

const HEADERS_COMPLETE = HTTPParser.kOnHeadersComplete;
const BODY = HTTPParser.kOnBody;
const MESSAGE_COMPLETE = HTTPParser.kOnMessageComplete;

/**
 * One client connection. Write bytes with {@link write}, wait for answers with {@link waitForAnswers}, for
 * the server to close with {@link waitForClose}; {@link destroy} when done (the one-shot {@link exchange}
 * does all of this).
 */
export class RawConnection {
  readonly answers: RawAnswer[] = [];
  readonly interim: RawAnswer[] = [];
  closed = false;
  socketError: string | undefined;
  parseError: string | undefined;

  private readonly parser = new HTTPParser(HTTPParser.RESPONSE);
  private readonly heads: boolean[] = [];
  private current: { head: RawAnswer; body: Buffer[] } | undefined;
  private readonly waiters = new Set<() => void>();

  private constructor(private readonly socket: Socket) {
    this.parser[HEADERS_COMPLETE] = (info) => {
      const headers: Record<string, string | string[]> = {};
      for (let index = 0; index < info.headers.length; index += 2) {
        const name = (info.headers[index] as string).toLowerCase();
        const value = info.headers[index + 1] as string;
        const held = headers[name];
        headers[name] = held === undefined ? value : Array.isArray(held) ? [...held, value] : [held, value];
      }
      const head: RawAnswer = {
        status: info.statusCode,
        statusMessage: info.statusMessage,
        version: `${info.versionMajor}.${info.versionMinor}`,
        headers,
        body: '',
      };
      this.current = { head, body: [] };
      // RFC 9112 §6.3: an answer to HEAD has no body, nor has a 1xx, 204 or 304 answer, whatever its headers say.
      const interim = info.statusCode >= 100 && info.statusCode < 200;
      const toHead = !interim && this.heads[this.answers.length] === true;
      return interim || toHead || info.statusCode === 204 || info.statusCode === 304 ? 1 : 0;
    };
    this.parser[BODY] = (chunk, offset, length) => {
      this.current?.body.push(Buffer.from(chunk.subarray(offset, offset + length)));
    };
    this.parser[MESSAGE_COMPLETE] = () => {
      const current = this.current;
      this.current = undefined;
      if (current === undefined) return;
      current.head.body = Buffer.concat(current.body).toString('utf8');
      if (current.head.status < 200) this.interim.push(current.head);
      else this.answers.push(current.head);
      this.notify();
    };
    socket.on('data', (data: Buffer) => {
      if (this.parseError !== undefined) return;
      const result = this.parser.execute(data);
      if (result instanceof Error) this.parseError = result.message;
      this.notify();
    });
    socket.on('end', () => {
      if (this.parseError === undefined) {
        const result = this.parser.finish();
        if (result instanceof Error && this.current !== undefined) this.parseError = `${result.message} (answer cut short)`;
      }
      this.markClosed();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      this.socketError = error.code ?? error.message;
      this.markClosed();
    });
    socket.on('close', () => this.markClosed());
  }

  /** Opens a connection to `origin` (`http://127.0.0.1:<port>`). */
  static open(origin: Origin, options: ConnectOptions = {}): Promise<RawConnection> {
    const url = new URL(origin);
    return new Promise((resolve, reject) => {
      const socket = connect({
        host: url.hostname,
        port: Number(url.port),
        ...(options.localAddress !== undefined ? { localAddress: options.localAddress } : {}),
      });
      socket.setNoDelay(true);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no connection to ${origin} within ${options.timeoutMs ?? DEFAULT_TIMEOUT_MS} ms`));
      }, options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(new RawConnection(socket));
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
  }

  /**
   * Declares that the next answer (after those already declared) answers a HEAD request, so the parser reads
   * no body for it. Call once per request, in order, before its answer arrives: `true` for HEAD.
   */
  expectAnswerTo(head: boolean): void {
    this.heads.push(head);
  }

  /**
   * Writes `data` (a string is sent as latin1, one byte per code unit, so any byte 0x00–0xFF can be written
   * as a character; use a Buffer for UTF-8). Resolves once the bytes are handed to the kernel; a write to a
   * connection the server has dropped resolves too (the error shows in {@link socketError}).
   */
  write(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'latin1') : data;
    if (this.socket.destroyed || !this.socket.writable) return Promise.resolve();
    return new Promise((resolve) => {
      this.socket.write(bytes, () => resolve());
    });
  }

  /** Ends the client's side of the connection (half-close): the server reads end-of-stream. */
  end(): void {
    this.socket.end();
  }

  /**
   * Waits until at least `count` final answers have been read, the server closed the connection, the answers
   * could not be parsed, or `timeoutMs` passed; answers whether `count` answers arrived.
   */
  waitForAnswers(count: number, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<boolean> {
    return this.waitUntil(() => this.answers.length >= count || this.closed || this.parseError !== undefined, timeoutMs).then(
      () => this.answers.length >= count,
    );
  }

  /** Waits until an interim (1xx) answer has been read (or close, or timeout); answers whether one arrived. */
  waitForInterim(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<boolean> {
    return this.waitUntil(() => this.interim.length > 0 || this.answers.length > 0 || this.closed, timeoutMs).then(
      () => this.interim.length > 0,
    );
  }

  /** Waits until the server closes the connection, or `timeoutMs` passes; answers whether it closed. */
  waitForClose(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<boolean> {
    return this.waitUntil(() => this.closed, timeoutMs).then(() => this.closed);
  }

  /** Drops the connection. */
  destroy(): void {
    this.socket.destroy();
  }

  /** A snapshot of what the connection saw. */
  snapshot(timedOut: boolean): RawExchange {
    return {
      answers: [...this.answers],
      interim: [...this.interim],
      closed: this.closed,
      timedOut,
      socketError: this.socketError,
      parseError: this.parseError,
    };
  }

  private markClosed(): void {
    if (this.closed) return;
    this.closed = true;
    this.notify();
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private waitUntil(done: () => boolean, timeoutMs: number): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      const check = () => {
        if (done()) finish();
      };
      const timer = setTimeout(finish, timeoutMs);
      this.waiters.add(check);
    });
  }
}

/** Options of {@link exchange}. */
export interface ExchangeOptions extends ConnectOptions {
  /**
   * How many final answers to wait for. Default: the number of requests whose answers are declared with
   * `head`, or 1.
   */
  answers?: number;
  /**
   * For each expected answer in order, whether it answers a HEAD request (no body). Default: none is. A
   * single boolean applies to every answer.
   */
  head?: boolean | readonly boolean[];
  /** Wait for the server to close the connection after the answers. Default `false`. */
  waitForClose?: boolean;
  /**
   * Half-close the client's side after the last write. Default `false`. (Each write waits for the previous one
   * to be handed to the kernel, and Nagle's algorithm is off, so writes usually arrive as separate segments.)
   */
  endAfterWrite?: boolean;
}

/**
 * Opens a connection, writes `chunks` one write each (a string is latin1: one byte per character), waits for
 * the answers (and, if asked, for the server to close), and drops the connection. Each of the two waits ends
 * after `timeoutMs` at the latest.
 */
export async function exchange(
  origin: Origin,
  chunks: string | Uint8Array | ReadonlyArray<string | Uint8Array>,
  options: ExchangeOptions = {},
): Promise<RawExchange> {
  const list = typeof chunks === 'string' || chunks instanceof Uint8Array ? [chunks] : chunks;
  const heads = typeof options.head === 'boolean' ? [options.head] : (options.head ?? []);
  const count = options.answers ?? Math.max(1, heads.length);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const connection = await RawConnection.open(origin, options);
  try {
    for (let index = 0; index < count; index += 1) {
      connection.expectAnswerTo(typeof options.head === 'boolean' ? options.head : heads[index] === true);
    }
    for (const chunk of list) await connection.write(chunk);
    if (options.endAfterWrite === true) connection.end();
    let timedOut = !(await connection.waitForAnswers(count, timeoutMs)) && !connection.closed;
    if (options.waitForClose === true && !connection.closed) timedOut = !(await connection.waitForClose(timeoutMs));
    return connection.snapshot(timedOut);
  } finally {
    connection.destroy();
  }
}

/** The value of a header sent once (`undefined` when absent); a header sent several times fails the lookup. */
export function headerOf(answer: RawAnswer, name: string): string | undefined {
  const value = answer.headers[name.toLowerCase()];
  if (Array.isArray(value)) throw new Error(`header ${name} was sent ${value.length} times: ${value.join(' | ')}`);
  return value;
}

/** The answer as the fetch-based helpers of `http-client.ts` take it (repeated headers joined with ", "). */
export function toAnswer(answer: RawAnswer): Answer {
  const headers = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  return { status: answer.status, headers, text: answer.body };
}

/** A short description of what a connection saw, for assertion messages. */
export function describeExchange(result: RawExchange): string {
  const answers = result.answers.map((answer) => `${answer.status} ${answer.body.slice(0, 160)}`);
  const flags = [
    result.closed ? 'closed' : 'open',
    result.timedOut ? 'timed out' : '',
    result.socketError ? `socket error ${result.socketError}` : '',
    result.parseError ? `parse error ${result.parseError}` : '',
  ].filter(Boolean);
  return `[${answers.join(' ; ')}] (${flags.join(', ')})`;
}
