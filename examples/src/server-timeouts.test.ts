/**
 * HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS on the running example servers (started as a user would): a client
 * that never finishes its request — no byte at all, half a request head, a head and half its body — is answered
 * 408 and its connection closed, while the server goes on serving others. The timeouts are set small, so the
 * closes come soon; the test waits for each close (the event), never for an amount of time, and asserts
 * nothing about how long they took.
 */
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startExample, stopExamples } from './spawn-example.js';

afterEach(stopExamples);

const KEY = 'slow-loris-key';

/** A connection that writes `bytes` and then nothing more; `closed` resolves with what it received once the server closes it. */
async function stalledConnection(url: string, bytes: string): Promise<{ socket: Socket; closed: Promise<string> }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  socket.on('error', () => undefined); // a reset shows as 'close'
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  if (bytes !== '') socket.write(bytes);
  return { socket, closed };
}

const STALLED: Array<[string, string]> = [
  ['no byte at all', ''],
  ['half a request line', 'GET /v1/categ'],
  ['a request head without its empty line', `GET /v1/categories HTTP/1.1\r\nHost: example\r\nAuthorization: Bearer ${KEY}\r\n`],
  ['a head sent one header short, outside the API', 'GET /health HTTP/1.1\r\nHost: example\r\n'],
  [
    'a create whose body stops after 10 of 100 bytes',
    `POST /v1/categories HTTP/1.1\r\nHost: example\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":"D`,
  ],
  ['a chunked body without its last chunk', `POST /v1/categories HTTP/1.1\r\nHost: example\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"na\r\n`],
];

describe.each(['fastify-server.ts', 'express-server.ts'])('%s with HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS', (script) => {
  it('answers 408 and closes every connection whose request never finishes arriving, and keeps serving', async () => {
    const server = await startExample(script, { PETSTORE_API_KEYS: `${KEY}:pro`, HEADERS_TIMEOUT_MS: '300', REQUEST_TIMEOUT_MS: '600' });
    // Eight slow-loris connections, as in the report that found them still open after 10 s (Node's defaults
    // are 60 s and 300 s, Fastify's request timeout none).
    const cases = [...STALLED, ...STALLED.slice(0, 2)];
    const stalled = await Promise.all(cases.map(([, bytes]) => stalledConnection(server.url, bytes)));

    // Meanwhile the server answers a client that sends its whole request.
    const listed = await fetch(`${server.url}/v1/categories`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(listed.status).toBe(200);

    const received = await Promise.all(stalled.map((connection) => connection.closed));
    received.forEach((text, index) => {
      expect(text, `${cases[index]?.[0]}: what the server sent before closing`).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    });
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  }, 30_000);
});
