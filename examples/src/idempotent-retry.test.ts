/**
 * A create whose answer is lost, end to end: the real API (Fastify, memory stores) behind a small TCP proxy
 * that forwards the first `POST /v1/categories`, waits for the server's whole answer (so the category IS
 * created) and then drops the client's connection instead of passing the answer on. The client cannot know
 * whether the category exists; it sends the create again with the same `Idempotency-Key`, the server replays
 * the first answer, and there is exactly one category. Once with the global fetch and once with node-fetch,
 * the connection closed (FIN) or reset (RST).
 */
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import nodeFetch from 'node-fetch';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { petstoreFastify } from '@petstore/adapter-fastify';
import { createPetstoreClient, type PetstoreFetch } from '@petstore/client';
import { createPetstore, staticApiKeys, type StaticApiKey } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { pairSockets } from '../test-support/tcp-proxy.js';

const API_KEY: StaticApiKey = { key: 'idempotent-retry-key', plan: 'enterprise', limits: { requestsPerMinute: 1000, requestsPerDay: 100_000 } };

/** The API on memory stores, mounted with the Fastify adapter on a free port of 127.0.0.1. */
async function startApi() {
  const petstore = createPetstore({
    apiKeys: staticApiKeys([API_KEY]),
    categories: memoryCategoryStore(),
    rateLimit: { store: memoryRateLimitStore(), anonymousStore: memoryRateLimitStore() },
  });
  const app = Fastify();
  await app.register(petstoreFastify, { prefix: '/v1', petstore });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { port, baseUrl: `http://127.0.0.1:${port}/v1`, close: () => app.close() };
}

/** One HTTP/1.1 message as it crossed the proxy: its first line, its headers (lower-case names), its bytes. */
interface HttpMessage {
  startLine: string;
  headers: Map<string, string>;
  body: string;
  raw: Buffer;
}

/**
 * Splits a byte stream into HTTP/1.1 messages framed by `Content-Length` (what the client and the server send
 * here). A message it cannot frame (a transfer coding, or a response without `Content-Length`) is reported to
 * `onProblem`: this proxy is for this test's traffic only.
 */
function messageReader(kind: 'request' | 'response', onMessage: (message: HttpMessage) => void, onProblem: (problem: string) => void) {
  let buffered = Buffer.alloc(0);
  return (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    for (;;) {
      const headEnd = buffered.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const [startLine = '', ...fieldLines] = buffered.subarray(0, headEnd).toString('latin1').split('\r\n');
      const headers = new Map<string, string>();
      for (const line of fieldLines) {
        const colon = line.indexOf(':');
        headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
      const length = headers.get('content-length');
      if (headers.has('transfer-encoding') || (length === undefined && kind === 'response')) {
        onProblem(`cannot frame this ${kind}: ${startLine}`);
        return;
      }
      const end = headEnd + 4 + Number(length ?? 0);
      if (buffered.length < end) return;
      const raw = buffered.subarray(0, end);
      buffered = buffered.subarray(end);
      onMessage({ startLine, headers, body: raw.subarray(headEnd + 4).toString('utf8'), raw });
    }
  };
}

/**
 * A TCP proxy to `upstreamPort` that passes everything on, except the answer to the first
 * `POST /v1/categories`: that request is forwarded, and once the server's whole answer has arrived the
 * client's connection is dropped (`close`: FIN, `reset`: RST) without it. Records every request and answer.
 */
async function droppingProxy(upstreamPort: number, how: 'close' | 'reset') {
  const requests: HttpMessage[] = [];
  const answers: Array<HttpMessage & { dropped: boolean }> = [];
  const problems: string[] = [];
  const sockets = new Set<Socket>();
  let dropped = false;

  const server = createServer((client) => {
    const upstream = connect(upstreamPort, '127.0.0.1');
    pairSockets(client, upstream, sockets);
    // One entry per forwarded request, in order: whether its answer is to be dropped.
    const waiting: boolean[] = [];
    const problem = (text: string) => {
      problems.push(text);
      client.destroy();
    };
    client.on(
      'data',
      messageReader(
        'request',
        (request) => {
          requests.push(request);
          const drop = !dropped && request.startLine.startsWith('POST /v1/categories ');
          dropped ||= drop;
          waiting.push(drop);
          upstream.write(request.raw);
        },
        problem,
      ),
    );
    upstream.on(
      'data',
      messageReader(
        'response',
        (answer) => {
          const drop = waiting.shift();
          if (drop === undefined) return problem(`an answer without a request: ${answer.startLine}`);
          answers.push({ ...answer, dropped: drop });
          if (!drop) client.write(answer.raw);
          else if (how === 'reset') client.resetAndDestroy();
          else client.destroy();
        },
        problem,
      ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const stop = () => {
    server.close();
    for (const socket of sockets) socket.destroy();
  };
  return { baseUrl: `http://127.0.0.1:${port}/v1`, requests, answers, problems, stop };
}

const fetches: Array<{ name: string; fetch: PetstoreFetch }> = [
  { name: 'global fetch', fetch: globalThis.fetch },
  { name: 'node-fetch', fetch: nodeFetch },
];
const cases = fetches.flatMap((variant) => (['close', 'reset'] as const).map((how) => ({ ...variant, how })));

describe('a create whose connection drops after the server created the category', () => {
  it.for(cases)('is retried with its Idempotency-Key and replayed: one category ($name, connection $how)', async ({ name, fetch, how }, { onTestFinished }) => {
    const api = await startApi();
    onTestFinished(() => api.close());
    const proxy = await droppingProxy(api.port, how);
    onTestFinished(proxy.stop);
    const waits: number[] = [];
    const client = createPetstoreClient({
      baseUrl: proxy.baseUrl,
      apiKey: API_KEY.key,
      fetch,
      // No real waiting: the retry goes out at once, and the wait it would have made is recorded.
      sleep: async (ms) => {
        waits.push(ms);
      },
    });
    const newCategory = { name: `Parrots via ${name}, ${how}`, description: 'Talking birds' };

    const created = await client.createCategory(newCategory);

    expect(created).toEqual({ id: expect.any(Number), ...newCategory });
    expect(proxy.problems).toEqual([]);
    expect(waits).toHaveLength(1); // one retry

    // Two creates went out, with the same key, an sf-string holding a UUID.
    const creates = proxy.requests.filter((request) => request.startLine.startsWith('POST /v1/categories '));
    expect(creates).toHaveLength(2);
    const [firstKey, secondKey] = creates.map((request) => request.headers.get('idempotency-key'));
    expect(firstKey).toMatch(/^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$/);
    expect(secondKey).toBe(firstKey);
    expect(creates[1]?.body).toBe(creates[0]?.body);

    // The first answer (dropped) created the category; the second is its replay, and is what the client returned.
    expect(proxy.answers).toHaveLength(2);
    const [lost, replay] = proxy.answers;
    expect(lost).toMatchObject({ startLine: expect.stringMatching(/^HTTP\/1\.1 201 /), dropped: true });
    expect(lost?.headers.has('idempotent-replayed')).toBe(false);
    expect(JSON.parse(lost?.body ?? '')).toEqual(created);
    expect(replay).toMatchObject({ startLine: expect.stringMatching(/^HTTP\/1\.1 201 /), dropped: false });
    expect(replay?.headers.get('idempotent-replayed')).toBe('true');
    expect(JSON.parse(replay?.body ?? '')).toEqual(created);

    // The server holds exactly one category of that name.
    const direct = createPetstoreClient({ baseUrl: api.baseUrl, apiKey: API_KEY.key, fetch });
    const listed = await direct.listCategories();
    expect(listed.filter((category) => category.name === newCategory.name)).toEqual([created]);
    expect(listed).toHaveLength(1);
  });
});
