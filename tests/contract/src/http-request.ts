/**
 * The suites' HTTP client: one request with `node:http` (its global agent keeps sockets alive, as `fetch` does),
 * the answer read whole. The contract suite (http-client.ts) and the Redis and PostgreSQL suites
 * (tests/redis/src/serve.ts) send their requests through it.
 *
 * Not the global `fetch`: on Node.js 20 a `fetch` costs about three times the CPU of a `node:http` request
 * (undici's WHATWG streams, Headers and AbortSignal per request; measured on the same server, 0.8–1.1 ms against
 * 0.26–0.37 ms per request with the server's share), and `npm test` sends over 5,000 of them. What the suites
 * check is the server's answer, which is the same bytes for either client. The client package's own tests use
 * `fetch`, as its users do.
 */
import http from 'node:http';

/** An answer read whole: status, headers (as `fetch` gives them), and the body as text ('' when there is none). */
export interface HttpAnswer {
  status: number;
  headers: Headers;
  text: string;
}

/** What to send: method (default GET), headers, and a body (a string is sent as UTF-8, with no Content-Type added). */
export interface HttpRequestInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

/**
 * Sends one request to `url` (`http:` only) and resolves with the whole answer.
 * @throws (rejects) the socket's error when the request cannot be sent or the answer is cut short, as `fetch` rejects.
 */
export function httpRequest(url: string, init: HttpRequestInit = {}): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: init.method ?? 'GET', headers: init.headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', reject);
      response.on('end', () => {
        const headers = new Headers();
        const raw = response.rawHeaders;
        for (let i = 0; i < raw.length; i += 2) headers.append(raw[i] as string, raw[i + 1] as string);
        resolve({ status: response.statusCode as number, headers, text: Buffer.concat(chunks).toString('utf8') });
      });
    });
    request.on('error', reject);
    request.end(init.body);
  });
}
