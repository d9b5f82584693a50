import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLIENT_ADDRESS, expectError, request, testPetstore } from '../../test-support/petstore.js';
import { testRateLimitStore } from '../../test-support/rate-limit-store.js';
import { createDocsPages } from './docs.js';

/** The installed swagger-ui-dist's file, read here the way a reader's browser would get it from the package. */
const rendererFile = (name: string) =>
  readFileSync(join(dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json')), name), 'utf8');

const anonymous = (path: string, method = 'GET') => request(path, {}, method);

/** The addresses of the page's stylesheet and scripts, as the HTML gives them (relative to `{prefix}/`). */
function assetAddresses(html: string): string[] {
  return [...html.matchAll(/(?:href|src)="(docs\/[^"]+)"/g)].map((match) => match[1] as string);
}

describe('the reference page (docs option)', () => {
  it('is not served unless asked for', async () => {
    const { petstore } = testPetstore();
    expectError(await petstore.handle(anonymous('/docs')), 401, 'unauthorized');
  });

  it('serves the HTML page without a key, rate limited like the description, under a strict Content-Security-Policy', async () => {
    const { petstore } = testPetstore({ docs: true, rateLimit: { store: testRateLimitStore(), cost: { getOpenApiDocument: 2 } } });
    const page = await petstore.handle(anonymous('/docs'));
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['cache-control']).toBe('no-cache');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    const policy = page.headers['content-security-policy'] ?? '';
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain("connect-src 'self'");
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).not.toContain('unsafe');
    // The anonymous policy (30 per minute by default), charged the description's cost of 2.
    expect(page.headers['x-ratelimit-limit']).toBe('30');
    expect(page.headers['x-ratelimit-remaining']).toBe('28');
    expect(page.body).toContain('<title>Petstore API reference</title>');
    expect(page.body).not.toMatch(/<script>|<style|https?:\/\//);
  });

  it('serves each asset the page names, from the installed swagger-ui-dist, cached for a year', async () => {
    const { petstore } = testPetstore({ docs: true });
    const page = await petstore.handle(anonymous('/docs'));
    const addresses = assetAddresses(page.body ?? '');
    expect(addresses.map((address) => address.replace(/\?.*/, ''))).toEqual([
      'docs/swagger-ui.css',
      'docs/swagger-ui-bundle.js',
      'docs/initializer.js',
    ]);
    const answers = await Promise.all(addresses.map((address) => petstore.handle(anonymous(`/${address}`))));
    expect(answers.map((answer) => [answer.status, answer.headers['content-type'], answer.headers['cache-control']])).toEqual([
      [200, 'text/css; charset=utf-8', 'public, max-age=31536000, immutable'],
      [200, 'text/javascript; charset=utf-8', 'public, max-age=31536000, immutable'],
      [200, 'text/javascript; charset=utf-8', 'public, max-age=31536000, immutable'],
    ]);
    expect(answers[0]?.body).toBe(rendererFile('swagger-ui.css'));
    expect(answers[1]?.body).toBe(rendererFile('swagger-ui-bundle.js'));
    expect(answers[2]?.body).toContain("new URL('openapi.json', document.baseURI)");
    expect(answers[2]?.body).toContain('validatorUrl: null');
  });

  it('answers HEAD without a body, 405 with Allow for other methods, and 404 for other files', async () => {
    const { petstore } = testPetstore({ docs: true });
    const head = await petstore.handle(anonymous('/docs', 'HEAD'));
    expect(head.status).toBe(200);
    expect(head.body).toBeUndefined();
    const post = await petstore.handle(anonymous('/docs', 'POST'));
    expectError(post, 405, 'method_not_allowed');
    expect(post.headers['allow']).toBe('GET, HEAD');
    expectError(await petstore.handle(anonymous('/docs/index.html')), 404, 'not_found');
    expectError(await petstore.handle(anonymous('/docs/../openapi.json')), 404, 'not_found');
  });

  it('is refused like the description once the caller is over its limit', async () => {
    const { petstore } = testPetstore({ docs: true, rateLimit: { store: testRateLimitStore(), anonymous: { requestsPerMinute: 1, requestsPerDay: 10 } } });
    expect((await petstore.handle(anonymous('/docs'))).status).toBe(200);
    const refused = await petstore.handle({ ...anonymous('/docs/initializer.js'), clientAddress: CLIENT_ADDRESS });
    expectError(refused, 429, 'rate_limited');
    expect(refused.headers['content-security-policy']).toBeUndefined();
  });

  it('takes a title (escaped) and can turn "Try it out" off', async () => {
    const { petstore } = testPetstore({ docs: { title: 'Pets & <Co>', tryItOut: false } });
    expect((await petstore.handle(anonymous('/docs'))).body).toContain('<title>Pets &#38; &#60;Co&#62;</title>');
    const initializer = await petstore.handle(anonymous('/docs/initializer.js'));
    expect(initializer.body).toContain('supportedSubmitMethods: []');
  });

  it('refuses wrong options at creation', () => {
    expect(() => testPetstore({ docs: 'yes' as never })).toThrow(/createPetstore: docs must be true, false or \{ title\?, tryItOut\? \}/);
    expect(() => testPetstore({ docs: { theme: 'dark' } as never })).toThrow(/docs must be true, false or \{ title\?, tryItOut\? \} \(got an object\)/);
  });

  it('refuses at creation, naming the package, when swagger-ui-dist is not installed', () => {
    const directory = mkdtempSync(join(tmpdir(), 'petstore-docs-'));
    try {
      const module = join(directory, 'index.js');
      writeFileSync(module, '');
      // Resolved from a directory with no node_modules above it that holds swagger-ui-dist.
      expect(() => createDocsPages(true, { title: 'Petstore' }, pathToFileURL(module).href)).toThrow(
        'createPetstore: docs needs the swagger-ui-dist package (the page\'s scripts and styles), which is not installed: npm install swagger-ui-dist',
      );
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
