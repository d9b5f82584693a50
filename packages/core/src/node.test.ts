/**
 * The Node layer against real Node requests: a `node:http` server on port 0, requests written on a raw
 * socket so that duplicated headers and absolute-form targets reach it exactly as sent.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { request as httpRequest } from 'node:http';
import { staticApiKeys } from './auth/api-key.js';
import { createPetstore } from './http/pipeline.js';
import {
  guardOptionsOf,
  nodeHeadersCutOff,
  nodePetstoreRequest,
  nodeRequestHeaders,
  nodeRequestPath,
  petstoreCheckExpectation,
  petstoreNodeHandler,
  writeNodeResponse,
} from './node.js';
import { testRateLimitStore } from '../test-support/rate-limit-store.js';
import { testCategoryStore } from '../test-support/category-store.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
  }
});

/** A server that answers every request with `answer(request)` as JSON. */
async function serve(answer: (request: IncomingMessage, response: ServerResponse) => unknown): Promise<{ server: Server; port: number }> {
  const server = createServer((request, response) => {
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify(answer(request, response) ?? null));
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port };
}

/** A server answering with `listener` alone; its origin. */
async function listen(listener: (request: IncomingMessage, response: ServerResponse) => void): Promise<string> {
  const server = createServer(listener);
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Writes `head` (CRLF line ends added) on a raw socket and reads until the server closes the connection. */
async function raw(port: number, lines: string[]): Promise<{ status: number; body: string }> {
  const socket = connect(port, '127.0.0.1');
  socket.write(`${[...lines, 'Connection: close', '', ''].join('\r\n')}`);
  let text = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    text += chunk;
  });
  await once(socket, 'close');
  return { status: Number(text.slice(9, 12)), body: text.slice(text.indexOf('\r\n\r\n') + 4) };
}

describe('nodeRequestHeaders', () => {
  it('keeps every Authorization and Content-Type when sent more than once', async () => {
    const { port } = await serve((request) => nodeRequestHeaders(request));
    const { body } = await raw(port, [
      'GET /v1/categories HTTP/1.1',
      'Host: x',
      'Authorization: Bearer first',
      'content-type: application/json',
      'AUTHORIZATION: Bearer second',
      'Content-Type: text/plain',
    ]);
    const headers = JSON.parse(body) as Record<string, unknown>;
    expect(headers['authorization']).toEqual(['Bearer first', 'Bearer second']);
    expect(headers['content-type']).toEqual(['application/json', 'text/plain']);
    expect(headers['host']).toBe('x');
  });

  it('answers the parsed headers themselves when nothing is repeated', async () => {
    const { port } = await serve((request) => nodeRequestHeaders(request) === request.headers);
    const { body } = await raw(port, ['GET / HTTP/1.1', 'Host: x', 'Authorization: Bearer one', 'Accept: a', 'Accept: b']);
    expect(JSON.parse(body)).toBe(true);
  });
});

describe('nodeHeadersCutOff', () => {
  const request = (extraHeaders: number) => {
    const lines = ['GET / HTTP/1.1', 'Host: x', 'Authorization: Bearer first'];
    for (let index = 0; index < extraHeaders; index++) lines.push('X: y');
    return [...lines, 'Authorization: Bearer second'];
  };

  it('flags a request whose header fields reached the server limit, which Node 20 cuts off without a word', async () => {
    const { server, port } = await serve((incoming) => ({ cutOff: nodeHeadersCutOff(incoming), fields: incoming.rawHeaders.length / 2 }));
    server.maxHeadersCount = 20;
    const small = await raw(port, request(5));
    expect(small.status).toBe(200);
    expect(JSON.parse(small.body)).toEqual({ cutOff: false, fields: 9 });
    // Node 20 drops the fields past the limit (the second Authorization among them) and runs the handler;
    // Node 22 and later refuse the request with 431 before any handler runs. Either way nothing is missed.
    const large = await raw(port, request(100));
    const outcome = large.status === 431 ? 'refused by Node' : (JSON.parse(large.body) as { cutOff: boolean }).cutOff ? 'flagged' : 'missed';
    expect(['refused by Node', 'flagged']).toContain(outcome);
  });

  it('never flags a request when the server has no limit (maxHeadersCount 0)', async () => {
    const { server, port } = await serve((incoming) => ({ cutOff: nodeHeadersCutOff(incoming), auth: incoming.rawHeaders.filter((name) => name === 'Authorization').length }));
    server.maxHeadersCount = 0;
    const answer = await raw(port, request(1200)); // past Node's default limit of 1,000 fields
    expect(JSON.parse(answer.body)).toEqual({ cutOff: false, auth: 2 });
  });
});

describe('nodeRequestPath', () => {
  it('takes an absolute-form target as its path, below the prefix', async () => {
    const { port } = await serve((request) => nodeRequestPath(request.url ?? '', '/v1'));
    const { body } = await raw(port, [`GET http://127.0.0.1:${port}/v1/categories?x=1 HTTP/1.1`, 'Host: 127.0.0.1']);
    expect(JSON.parse(body)).toBe('/categories?x=1');
  });

  it.each([
    ['/v1/categories', '/v1', '/categories'],
    ['/v1', '/v1', '/'],
    ['/categories', '', '/categories'],
    ['http://host/categories', '', '/categories'],
    ['/elsewhere', '/v1', '/elsewhere'],
  ])('finds %j below %j as %j', (url, prefix, expected) => {
    expect(nodeRequestPath(url, prefix)).toBe(expected);
  });
});

describe('petstoreCheckExpectation', () => {
  it('hands requests under the prefix to the request handlers and leaves Node’s 417 for the rest', async () => {
    const { server, port } = await serve((request) => ({ url: request.url, expect: request.headers.expect }));
    const before = await raw(port, ['GET /v1/categories HTTP/1.1', 'Host: x', 'Expect: foo']);
    expect(before.status).toBe(417); // Node's own answer while no listener is attached

    server.on('checkExpectation', petstoreCheckExpectation({ prefix: '/v1' }));
    const under = await raw(port, ['GET /v1/categories HTTP/1.1', 'Host: x', 'Expect: foo']);
    expect(under.status).toBe(200);
    expect(JSON.parse(under.body)).toEqual({ url: '/v1/categories', expect: 'foo' });
    const absolute = await raw(port, [`GET http://127.0.0.1:${port}/v1 HTTP/1.1`, 'Host: x', 'Expect: foo']);
    expect(absolute.status).toBe(200);
    const outside = await raw(port, ['GET /health HTTP/1.1', 'Host: x', 'Expect: foo']);
    expect(outside).toEqual(before); // as Node answers without the listener
  });
});

describe('nodePetstoreRequest and writeNodeResponse', () => {
  it("translate a Node request and write the answer, headers merged over the host's", async () => {
    const seen: unknown[] = [];
    const origin = await listen((incoming, response) => {
      const translated = nodePetstoreRequest(incoming, { response });
      seen.push({ method: translated.method, path: translated.path, clientAddress: translated.clientAddress, body: translated.body?.kind });
      response.setHeader('x-host', 'kept');
      writeNodeResponse(response, { status: 201, headers: { 'content-type': 'application/json; charset=utf-8', 'x-api': 'yes' }, body: '{"ok":true}' });
    });
    const answer = await fetch(`${origin}/v1/categories?x=1`, { method: 'POST', body: '{}' });
    expect(answer.status).toBe(201);
    expect(answer.headers.get('x-host')).toBe('kept');
    expect(answer.headers.get('x-api')).toBe('yes');
    expect(answer.headers.get('content-length')).toBe('11'); // one write, not chunked
    expect(answer.headers.get('transfer-encoding')).toBeNull();
    expect(await answer.text()).toBe('{"ok":true}');
    expect(seen).toEqual([{ method: 'POST', path: '/categories?x=1', clientAddress: '127.0.0.1', body: 'stream' }]);
  });

  it('gives a signal that aborts when the client goes away before the answer, and only then', async () => {
    const outcomes: boolean[] = [];
    let slowArrived: () => void = () => undefined;
    const arrived = new Promise<void>((resolve) => (slowArrived = resolve));
    const origin = await listen((incoming, response) => {
      const signal = nodePetstoreRequest(incoming, { response }).signal as AbortSignal;
      if (incoming.url === '/fast') {
        response.end('done');
        response.on('close', () => outcomes.push(signal.aborted));
        return;
      }
      signal.addEventListener('abort', () => outcomes.push(true));
      slowArrived();
    });
    expect(await (await fetch(`${origin}/fast`)).text()).toBe('done');
    await expect.poll(() => outcomes).toEqual([false]);
    const client = httpRequest(`${origin}/slow`);
    client.on('error', () => undefined);
    client.end();
    await arrived; // the server holds the request, unanswered
    client.destroy();
    await expect.poll(() => outcomes).toEqual([false, true]);
  });
});

describe('petstoreNodeHandler', () => {
  const api = () =>
    createPetstore({
      apiKeys: staticApiKeys([{ key: 'node-key', plan: 'free' }]),
      categories: testCategoryStore(),
      rateLimit: { store: testRateLimitStore() },
    });

  it('serves the API under the prefix and answers other paths 404 without rate-limit headers', async () => {
    const origin = await listen(petstoreNodeHandler(api()));
    const listed = await fetch(`${origin}/v1/categories`, { headers: { authorization: 'Bearer node-key' } });
    expect(listed.status).toBe(200);
    expect(listed.headers.get('x-ratelimit-remaining')).toBe('59');
    expect(await listed.json()).toEqual([]);
    const outside = await fetch(`${origin}/health`);
    expect(outside.status).toBe(404);
    expect(await outside.json()).toEqual({ code: 'not_found', message: expect.any(String), status: 404 });
    expect(outside.headers.get('x-ratelimit-remaining')).toBeNull();
  });

  it('hands other paths to the fallback, and takes the client address from the option', async () => {
    const origin = await listen(
      petstoreNodeHandler(api(), {
        prefix: '/api',
        fallback: (_request, response) => response.end('host route'),
        clientAddress: (incoming) => incoming.headers['x-client'] as string,
      }),
    );
    expect(await (await fetch(`${origin}/v1/categories`)).text()).toBe('host route');
    const remainingFor = async (client: string) =>
      (await fetch(`${origin}/api/categories`, { headers: { 'x-client': client } })).headers.get('x-ratelimit-remaining');
    expect(await remainingFor('198.51.100.1')).toBe('29');
    expect(await remainingFor('198.51.100.1')).toBe('28');
    expect(await remainingFor('198.51.100.2')).toBe('29');
  });
});

describe('guardOptionsOf', () => {
  it('answers the options of an adapter guard as petstore.guard takes them', () => {
    expect(guardOptionsOf(undefined, 'petstoreGuard')).toEqual({});
    expect(guardOptionsOf({}, 'petstoreGuard')).toEqual({});
    expect(guardOptionsOf({ cost: 3 }, 'petstoreGuard')).toEqual({ cost: 3 });
  });

  it.each([
    [{ cost: 0 }, /^myGuard: cost must be a whole number >= 1, got 0$/],
    [{ cost: '2' }, /^myGuard: cost must be a whole number >= 1, got 2$/],
    [{ costs: 2 }, /^myGuard: costs is not an option \(options: cost\)$/],
    [null, /^myGuard: the options must be an object/],
  ])('refuses %o with a TypeError naming the guard', (options, message) => {
    expect(() => guardOptionsOf(options, 'myGuard')).toThrow(message);
  });
});
