/**
 * The `Idempotency-Key` of createCategory: its form, a fresh key per call and the same on every retry, the
 * caller's own key, and the failures a create is retried after now that a repeat is answered with a replay.
 */
import { tcpTestServer } from '../test-support/tcp-test-server.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createPetstoreClient } from './client.js';
import {
  errorAnswer,
  nodeFetchDroppedError,
  rejection,
  type ScriptStep,
  scriptedClient as setup,
  undiciConnectError,
  undiciDroppedError,
} from '../test-support/scripted-fetch.js';

const created: ScriptStep = { status: 201, body: { id: 1, name: 'Dogs' } };
const dogs = { name: 'Dogs' };
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

afterEach(() => {
  vi.unstubAllGlobals();
});

/**
 * Parses a header value as one Structured Field String (RFC 9651, sections 4.2 and 4.2.5): optional spaces,
 * a quoted string with only `\"` and `\\` escapes and printable ASCII inside, nothing after it.
 * @throws Error when the value is anything else
 */
function parseSfString(value: string | undefined): string {
  const text = (value ?? '').replace(/^ +| +$/g, '');
  if (!text.startsWith('"')) throw new Error(`not an sf-string: ${value}`);
  let out = '';
  for (let i = 1; i < text.length; i++) {
    const char = text[i] as string;
    if (char === '\\') {
      const next = text[++i];
      if (next !== '"' && next !== '\\') throw new Error(`bad escape in ${value}`);
      out += next;
    } else if (char === '"') {
      if (i !== text.length - 1) throw new Error(`characters after the closing quote in ${value}`);
      return out;
    } else if (char < ' ' || char > '~') {
      throw new Error(`character ${char.charCodeAt(0)} in ${value}`);
    } else {
      out += char;
    }
  }
  throw new Error(`unterminated sf-string: ${value}`);
}

describe('parseSfString (the checker used below)', () => {
  it('reads quoted strings with escapes and refuses anything else', () => {
    expect(parseSfString('"a\\"b\\\\c"')).toBe('a"b\\c');
    expect(parseSfString(' "x" ')).toBe('x');
    for (const bad of ['abc', '"abc', '"a"b', '"a\\nb"', '"a\tb"', '"é"', '']) expect(() => parseSfString(bad)).toThrow();
  });
});

describe('the Idempotency-Key header', () => {
  it('is sent with every create as one sf-string holding a random (version 4) UUID', async () => {
    const { client, requests } = setup([created]);
    await client.createCategory(dogs);
    expect(parseSfString(requests[0]?.init.headers['idempotency-key'])).toMatch(UUID_V4);
  });

  it('is fresh for every call', async () => {
    const { client, requests } = setup([created]);
    for (let i = 0; i < 5; i++) await client.createCategory(dogs);
    const keys = requests.map((request) => request.init.headers['idempotency-key']);
    expect(keys).toHaveLength(5);
    expect(new Set(keys).size).toBe(5);
  });

  it('is the same on every retry of a call: after a 503, dropped connections and a 409 in flight', async () => {
    const script: ScriptStep[] = [
      errorAnswer(503, 'service_unavailable'),
      { reject: undiciDroppedError('close') },
      { reject: nodeFetchDroppedError('reset') },
      errorAnswer(409, 'idempotency_key_in_flight', { 'retry-after': '1' }),
      created,
    ];
    const { client, requests } = setup(script, { retry: { maxAttempts: 5 } });
    await expect(client.createCategory(dogs)).resolves.toEqual({ id: 1, name: 'Dogs' });
    const keys = requests.map((request) => request.init.headers['idempotency-key']);
    expect(keys).toHaveLength(5);
    expect(new Set(keys).size).toBe(1);
    await client.createCategory(dogs); // the next call: a new key
    expect(requests[5]?.init.headers['idempotency-key']).not.toBe(keys[0]);
  });

  it('is not sent by listCategories', async () => {
    const { client, requests } = setup([{ status: 200, body: [] }]);
    await client.listCategories();
    expect(requests[0]?.init.headers).not.toHaveProperty('idempotency-key');
  });
});

describe('retries of a create', () => {
  it.each([
    ['the global fetch, peer closed the socket (UND_ERR_SOCKET)', undiciDroppedError('close')],
    ['the global fetch, connection reset (ECONNRESET)', undiciDroppedError('reset')],
    ['node-fetch, socket hang up (ECONNRESET)', nodeFetchDroppedError('close')],
    ['node-fetch, connection reset (ECONNRESET)', nodeFetchDroppedError('reset')],
    ['a rejection without a code', new TypeError('fetch failed')],
  ])('a dropped connection is retried with backoff: %s', async (_, dropped) => {
    const { client, requests, time } = setup([{ reject: dropped }, created], { random: () => 0.5 });
    await expect(client.createCategory(dogs)).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests).toHaveLength(2);
    expect(time.sleeps).toEqual([250]);
  });

  it('a call that keeps failing on dropped connections reports the last network_error and its attempts', async () => {
    const dropped = undiciDroppedError('reset');
    const { client, requests } = setup([{ reject: dropped }], { retry: { maxAttempts: 3 } });
    const error = await rejection(client.createCategory(dogs));
    expect(error).toMatchObject({ code: 'network_error', status: 0, attempts: 3 });
    expect(error.cause).toBe(dropped);
    expect(requests).toHaveLength(3);
  });

  it('409 idempotency_key_in_flight is retried no sooner than its Retry-After', async () => {
    const inFlight = errorAnswer(409, 'idempotency_key_in_flight', { 'retry-after': '1' });
    const { client, requests, time, sentAt } = setup([inFlight, inFlight, created], { random: () => 0.999 });
    await expect(client.createCategory(dogs)).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests).toHaveLength(3);
    expect(time.sleeps).toEqual([1000, 1000]); // max(1000, 499) and max(1000, 999)
    expect(sentAt()).toEqual([0, 1000, 2000]);
  });

  it('a 409 in flight that outlasts the attempts is reported as such', async () => {
    const { client } = setup([errorAnswer(409, 'idempotency_key_in_flight', { 'retry-after': '1' })], { retry: { maxAttempts: 2 } });
    expect(await rejection(client.createCategory(dogs))).toMatchObject({
      code: 'idempotency_key_in_flight',
      status: 409,
      retryAfterSeconds: 1,
      attempts: 2,
    });
  });

  it.each([
    [422, 'idempotency_key_reused'],
    [400, 'invalid_idempotency_key'],
    [400, 'validation_failed'],
    [409, 'some_other_conflict'],
  ])('%i %s is not retried', async (status, code) => {
    const { client, requests, time } = setup([errorAnswer(status, code, { 'retry-after': '1' }), created]);
    expect(await rejection(client.createCategory(dogs))).toMatchObject({ code, status, attempts: 1 });
    expect(requests).toHaveLength(1);
    expect(time.sleeps).toEqual([]);
  });

  it('a refused connection is still retried', async () => {
    const { client, requests } = setup([{ reject: undiciConnectError('ECONNREFUSED') }, created]);
    await expect(client.createCategory(dogs)).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests).toHaveLength(2);
  });
});

describe("the caller's idempotencyKey", () => {
  it('is sent instead of a fresh one, on every retry', async () => {
    const { client, requests } = setup([errorAnswer(503, 'service_unavailable'), created]);
    await client.createCategory(dogs, { idempotencyKey: 'order-42:create-category' });
    expect(requests.map((request) => request.init.headers['idempotency-key'])).toEqual([
      '"order-42:create-category"',
      '"order-42:create-category"',
    ]);
  });

  it.each([
    ['plain', 'abc', '"abc"'],
    ['a quote and a backslash', 'a"b\\c', '"a\\"b\\\\c"'],
    ['spaces, kept', ' spaced key ', '" spaced key "'],
    ['every other printable', "!#$%&'()*+,-./:;<=>?@[]^_`{|}~", '"!#$%&\'()*+,-./:;<=>?@[]^_`{|}~"'],
    ['1 character', 'x', '"x"'],
    ['255 characters', 'k'.repeat(255), `"${'k'.repeat(255)}"`],
  ])('is serialized as an sf-string: %s', async (_, key, header) => {
    const { client, requests } = setup([created]);
    await client.createCategory(dogs, { idempotencyKey: key });
    expect(requests[0]?.init.headers['idempotency-key']).toBe(header);
    expect(parseSfString(header)).toBe(key);
  });

  it.each([
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['non-ASCII', 'café'],
    ['a line break', 'a\nb'],
    ['a tab', 'a\tb'],
    ['DEL', 'a\x7f'],
    ['a number', 42],
    ['null', null],
  ])('is refused before anything is sent when it is %s: the call rejects with a TypeError', async (_, key) => {
    const { client, requests } = setup([created]);
    let pending: Promise<unknown> | undefined;
    expect(() => {
      pending = client.createCategory(dogs, { idempotencyKey: key as string });
    }).not.toThrow();
    await expect(pending).rejects.toThrow(TypeError);
    await expect(pending).rejects.toThrow(/idempotencyKey/);
    expect(requests).toHaveLength(0);
  });
});

describe('making keys without crypto.randomUUID', () => {
  it('builds a version 4 UUID from crypto.getRandomValues (a browser page outside a secure context)', async () => {
    const fill = (byte: number) => ({ getRandomValues: <T extends Uint8Array>(array: T) => array.fill(byte) });
    const { client, requests } = setup([created]);
    vi.stubGlobal('crypto', fill(0xff));
    await client.createCategory(dogs);
    vi.stubGlobal('crypto', fill(0x00));
    await client.createCategory(dogs);
    const real = globalThis.crypto;
    vi.unstubAllGlobals();
    vi.stubGlobal('crypto', { getRandomValues: <T extends Uint8Array>(array: T) => real.getRandomValues(array) });
    await client.createCategory(dogs);
    expect(requests.map((request) => request.init.headers['idempotency-key'])).toEqual([
      '"ffffffff-ffff-4fff-bfff-ffffffffffff"',
      '"00000000-0000-4000-8000-000000000000"',
      expect.stringMatching(/^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$/),
    ]);
  });

  it('without any crypto, a create without a key of its own rejects with a TypeError and sends nothing', async () => {
    const { client, requests } = setup([created]);
    vi.stubGlobal('crypto', undefined);
    await expect(client.createCategory(dogs)).rejects.toThrow(TypeError);
    expect(requests).toHaveLength(0);
    await expect(client.createCategory(dogs, { idempotencyKey: 'mine' })).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests[0]?.init.headers['idempotency-key']).toBe('"mine"');
  });
});

describe('with the global fetch over a real socket', () => {
  /**
   * A TCP server that drops the connection of the first request once the whole request has arrived (`close`:
   * a FIN, `reset`: an RST) and answers every later one with a 201; `keys` collects each request's
   * Idempotency-Key.
   */
  async function droppingServer(how: 'close' | 'reset') {
    const keys: Array<string | undefined> = [];
    const server = await tcpTestServer((socket) => {
      let received = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        const headerEnd = received.indexOf('\r\n\r\n');
        if (headerEnd < 0) return;
        const head = received.subarray(0, headerEnd).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (received.length < headerEnd + 4 + length) return;
        received = Buffer.alloc(0);
        keys.push(/\r\nidempotency-key: *([^\r]*)/i.exec(head)?.[1]);
        if (keys.length === 1) {
          if (how === 'reset') socket.resetAndDestroy();
          else socket.destroy();
          return;
        }
        const body = JSON.stringify({ id: 7, name: 'Dogs' });
        socket.end(`HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
      });
    });
    return { ...server, keys };
  }

  it.for(['close', 'reset'] as const)('a create whose connection drops after sending (%s) is sent again with its key', async (how, { onTestFinished }) => {
    const server = await droppingServer(how);
    onTestFinished(server.stop);
    const client = createPetstoreClient({ baseUrl: server.baseUrl, apiKey: 'k', random: () => 0 });
    await expect(client.createCategory(dogs)).resolves.toEqual({ id: 7, name: 'Dogs' });
    expect(server.keys).toHaveLength(2);
    expect(parseSfString(server.keys[0])).toMatch(UUID_V4);
    expect(server.keys[1]).toBe(server.keys[0]);
  });
});
