/**
 * The Node layer against real Node requests: a `node:http` server on port 0, requests written on a raw
 * socket so that duplicated headers and absolute-form targets reach it exactly as sent.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeHeadersCutOff, nodeRequestHeaders, nodeRequestPath, petstoreCheckExpectation } from './node.js';

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
