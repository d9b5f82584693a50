import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { CONNECTION_NOT_ESTABLISHED_CODES, isConnectionNotEstablished } from './network.js';
import { nodeFetchSystemError, undiciConnectError } from './scripted-fetch.js';

/** A loopback port that nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('isConnectionNotEstablished', () => {
  it.each([...CONNECTION_NOT_ESTABLISHED_CODES])('%s from the global fetch and from node-fetch', (code) => {
    expect(isConnectionNotEstablished(undiciConnectError(code))).toBe(true);
    expect(isConnectionNotEstablished(nodeFetchSystemError(code))).toBe(true);
  });

  it.each(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'UND_ERR_SOCKET'])('not %s: the request may have been sent', (code) => {
    expect(isConnectionNotEstablished(undiciConnectError(code))).toBe(false);
    expect(isConnectionNotEstablished(nodeFetchSystemError(code))).toBe(false);
  });

  it('an AggregateError counts only when every address refused', () => {
    const refused = undiciConnectError('ECONNREFUSED').cause;
    const reset = undiciConnectError('ECONNRESET').cause;
    expect(isConnectionNotEstablished(new TypeError('fetch failed', { cause: new AggregateError([refused, refused]) }))).toBe(true);
    expect(isConnectionNotEstablished(new TypeError('fetch failed', { cause: new AggregateError([refused, reset]) }))).toBe(false);
  });

  it('not without a code', () => {
    expect(isConnectionNotEstablished(new TypeError('fetch failed'))).toBe(false);
    expect(isConnectionNotEstablished(new Error('aborted'))).toBe(false);
    expect(isConnectionNotEstablished(undefined)).toBe(false);
  });

  it("recognises the real global fetch's rejection for a closed port", async () => {
    const port = await closedPort();
    const error: unknown = await fetch(`http://127.0.0.1:${port}/v1/categories`).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(TypeError);
    expect(isConnectionNotEstablished(error)).toBe(true);
  });
});
