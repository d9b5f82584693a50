/**
 * The API reference page (`docs: true`) and a host's merged OpenAPI document, read in Debian's Chromium (driven by
 * playwright-core, headless) as a reader would: one browser for the file, one throwaway server per page.
 */
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { petstoreExpress } from '@petstore/adapter-express';
import { petstoreFastify } from '@petstore/adapter-fastify';
import { createPetstore, mergeOpenApiDocument, staticApiKeys } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { chromium, type Browser, type Page } from 'playwright-core';
import swaggerUi from 'swagger-ui-express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findChromium } from './chromium.js';

const KEY = 'browser-test-key-5d1c8e';
const found = findChromium();
const artifacts = fileURLToPath(new URL('../artifacts/', import.meta.url));

/** The petstore as the examples set it up: the page on, a beta operation, getPetById deprecated (the default). */
function examplePetstore() {
  return createPetstore({
    docs: true,
    stability: { listStoreOrders: 'beta' },
    apiKeys: staticApiKeys([{ key: KEY, plan: 'free' }]),
    categories: memoryCategoryStore(),
    rateLimit: { store: memoryRateLimitStore() },
  });
}

/**
 * A page that records what a reader would see go wrong: console errors (a Content-Security-Policy violation is
 * one), uncaught exceptions, and every request to another origin than `origin` (aborted, so nothing leaves).
 */
async function watchedPage(browser: Browser, origin: string) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems: string[] = [];
  const requests: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') problems.push(`console ${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  await page.route('**/*', async (route) => {
    const url = route.request().url();
    requests.push(url);
    if (new URL(url).origin === origin) await route.continue();
    else await route.abort('blockedbyclient');
  });
  return { page, problems, requests };
}

/** The path of an operation's summary line (Swagger UI strikes a deprecated one through with a class of its own). */
const PATH = '.opblock-summary-path, .opblock-summary-path__deprecated';

/** An operation's block, by Swagger UI's id for it (`operations-<tag>-<operationId>`). */
const operation = (page: Page, tag: string, operationId: string) => page.locator(`#operations-${tag}-${operationId}`);

describe.skipIf('skipReason' in found)('the reference page in Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: (found as { executablePath: string }).executablePath, headless: true });
  });
  afterAll(async () => {
    await browser?.close();
  });

  describe('<prefix>/docs served by the petstore (Fastify)', () => {
    let app: FastifyInstance;
    let origin: string;
    beforeAll(async () => {
      app = Fastify();
      await app.register(petstoreFastify, { prefix: '/v1', petstore: examplePetstore() });
      origin = await app.listen({ port: 0, host: '127.0.0.1' });
    });
    afterAll(async () => {
      await app?.close();
    });

    it('loads with no console error and no request leaving the server, and shows every operation, the deprecated mark and the stability marker', async () => {
      const { page, problems, requests } = await watchedPage(browser, origin);
      const answer = await page.goto(`${origin}/v1/docs`);
      expect(answer?.headers()['content-security-policy']).toContain("script-src 'self'");
      await page.locator('.opblock').first().waitFor();
      const summaries = await page.locator('.opblock-summary').evaluateAll(
        (blocks, path) => blocks.map((block) => `${block.querySelector('.opblock-summary-method')?.textContent} ${block.querySelector(path)?.textContent}`),
        PATH,
      );
      expect(summaries).toEqual(['GET /categories', 'POST /categories', 'GET /pets/{petId}', 'GET /store/orders', 'GET /openapi.json']);
      const tags = await page.locator('.opblock-tag').evaluateAll((headings) => headings.map((heading) => heading.getAttribute('data-tag')));
      expect(tags).toEqual(['categories', 'pets', 'store', 'meta']);
      // Swagger UI marks a deprecated operation with its own class (struck through, greyed), and no other.
      await expect.poll(() => page.locator('.opblock-deprecated').locator(PATH).allTextContents()).toEqual(['/pets/{petId}']);
      expect(await page.locator('.opblock-summary-path__deprecated').allTextContents()).toEqual(['/pets/{petId}']);

      mkdirSync(artifacts, { recursive: true });
      await page.screenshot({ path: `${artifacts}reference-page.png`, fullPage: true });

      // The stability marker: the operation's x-stability, shown with the extensions when it is opened.
      const orders = operation(page, 'store', 'listStoreOrders');
      await orders.locator('.opblock-summary-control').click();
      const extensions = orders.locator('.opblock-section', { hasText: 'Extensions' }).locator('tbody tr');
      await expect.poll(() => extensions.allTextContents()).toEqual(['x-stability"beta"', 'x-rate-limit-cost1']);

      expect(problems).toEqual([]);
      expect(requests.length).toBeGreaterThanOrEqual(5); // the page, its 3 files, the description
      expect(requests.filter((url) => new URL(url).origin !== origin)).toEqual([]);
      await page.close();
    });

    it('sends listCategories with the key a reader enters: 200 with the X-RateLimit-* headers; then 401 without it', async () => {
      const { page, problems, requests } = await watchedPage(browser, origin);
      await page.goto(`${origin}/v1/docs`);
      await page.locator('.btn.authorize').click();
      await page.locator('.modal-ux .auth-container input').fill(KEY);
      await page.locator('.modal-ux .auth-btn-wrapper .authorize').click();
      await page.locator('.modal-ux .btn-done').click();

      const list = operation(page, 'categories', 'listCategories');
      await list.locator('.opblock-summary-control').click();
      await list.locator('.try-out__btn').click();
      await list.locator('.execute').click();
      const status = list.locator('.live-responses-table tbody .response-col_status');
      await expect.poll(() => status.textContent()).toBe('200');
      const headers = await list.locator('.live-responses-table tbody .response-col_description').textContent();
      // The free plan: 60 per minute; this is the key's first request.
      expect(headers).toContain('x-ratelimit-limit: 60');
      expect(headers).toContain('x-ratelimit-remaining: 59');
      expect(headers).toMatch(/x-ratelimit-reset: \d{10}/);

      await page.locator('.btn.authorize').click();
      await page.locator('.modal-ux .auth-btn-wrapper button', { hasText: 'Logout' }).click();
      await page.locator('.modal-ux .btn-done').click();
      await list.locator('.execute').click();
      await expect.poll(() => status.textContent()).toBe('401');
      expect(await list.locator('.live-responses-table tbody .response-col_description').textContent()).toContain('"code": "unauthorized"');

      expect(problems.filter((problem) => !problem.includes('401'))).toEqual([]);
      expect(requests.filter((url) => new URL(url).origin !== origin)).toEqual([]);
      await page.close();
    });
  });

  /** Hosts that mount the API at /api/petstore, as an embedding app would; each answers its origin and how to stop. */
  const MOUNTED_HOSTS: Record<string, () => Promise<{ origin: string; close(): Promise<unknown> }>> = {
    fastify: async () => {
      const app = Fastify();
      await app.register(petstoreFastify, { prefix: '/api/petstore', petstore: examplePetstore() });
      return { origin: await app.listen({ port: 0, host: '127.0.0.1' }), close: () => app.close() };
    },
    express: async () => {
      const app = express();
      app.use('/api/petstore', petstoreExpress({ petstore: examplePetstore() }));
      const server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      return {
        origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => new Promise((resolve) => server.close(resolve)),
      };
    },
  };

  describe.each(Object.keys(MOUNTED_HOSTS))('the page of an API a %s host mounts at /api/petstore', (host) => {
    let mounted: { origin: string; close(): Promise<unknown> };
    beforeAll(async () => {
      mounted = await MOUNTED_HOSTS[host]!();
    });
    afterAll(async () => {
      await mounted?.close();
    });

    it("lists the mount as the server, and Try-it-out calls the API there: 200, then the next page by the answer's Link", async () => {
      const { origin } = mounted;
      const { page, problems, requests } = await watchedPage(browser, origin);
      await page.goto(`${origin}/api/petstore/docs`);
      await page.locator('.opblock').first().waitFor();
      expect(await page.locator('.servers select option').allTextContents()).toEqual(['/api/petstore - This server']);
      await page.locator('.btn.authorize').click();
      await page.locator('.modal-ux .auth-container input').fill(KEY);
      await page.locator('.modal-ux .auth-btn-wrapper .authorize').click();
      await page.locator('.modal-ux .btn-done').click();

      const list = operation(page, 'categories', 'listCategories');
      await list.locator('.opblock-summary-control').click();
      await list.locator('.try-out__btn').click();
      await list.locator('.execute').click();
      const status = list.locator('.live-responses-table tbody .response-col_status');
      await expect.poll(() => status.textContent()).toBe('200');
      expect(await list.locator('.request-url pre').textContent()).toBe(`${origin}/api/petstore/categories`);
      expect(requests).toContain(`${origin}/api/petstore/categories`);

      // The next page's Link, resolved against the URL of the answer it came with, stays under the mount.
      const create = (name: string) =>
        fetch(`${origin}/api/petstore/categories`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ name }) });
      for (const name of ['Dogs', 'Cats']) expect((await create(name)).status).toBe(201);
      const first = await fetch(`${origin}/api/petstore/categories?limit=1`, { headers: { authorization: `Bearer ${KEY}` } });
      const next = /^<([^>]*)>; rel="next"$/.exec(first.headers.get('link') ?? '')?.[1];
      const nextUrl = new URL(next ?? 'missing', first.url);
      expect(nextUrl.pathname).toBe('/api/petstore/categories');
      const second = await fetch(nextUrl, { headers: { authorization: `Bearer ${KEY}` } });
      expect(await second.json()).toEqual([{ id: 2, name: 'Cats' }]);

      expect(problems).toEqual([]);
      expect(requests.filter((url) => new URL(url).origin !== origin)).toEqual([]);
      await page.close();
    });
  });

  describe("a host's merged document served by swagger-ui-express (Express)", () => {
    let server: ReturnType<express.Express['listen']>;
    let origin: string;
    beforeAll(async () => {
      const petstore = examplePetstore();
      const hostDocument = {
        openapi: '3.1.0',
        info: { title: 'Pet shop', version: '3.2.0' },
        tags: [{ name: 'health', description: 'Probes' }],
        paths: { '/health': { get: { operationId: 'health', tags: ['health'], summary: 'Is the shop up', responses: { '200': { description: 'Up' } } } } },
      };
      const app = express();
      app.get('/health', (_request, response) => {
        response.json({ ok: true });
      });
      app.use('/v1', petstoreExpress({ petstore }));
      app.use('/api-docs', swaggerUi.serve, swaggerUi.setup(mergeOpenApiDocument(hostDocument, petstore, { prefix: '/v1' })));
      server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      await new Promise((resolve) => server?.close(resolve));
    });

    it("shows the host's operation and the petstore's, under their tags, and the petstore's schemas", async () => {
      const { page, problems, requests } = await watchedPage(browser, origin);
      await page.goto(`${origin}/api-docs/`);
      await page.locator('.opblock').first().waitFor();
      const summaries = await page.locator(PATH).allTextContents();
      expect(summaries).toEqual(['/health', '/v1/categories', '/v1/categories', '/v1/pets/{petId}', '/v1/store/orders', '/v1/openapi.json']);
      expect(await page.locator('.opblock-tag').evaluateAll((headings) => headings.map((heading) => heading.getAttribute('data-tag')))).toEqual([
        'health',
        'categories',
        'pets',
        'store',
        'meta',
      ]);
      await expect.poll(() => page.locator('section.models').textContent()).toMatch(/^Schemas\s*Category.*NewCategory.*Error/);
      expect(problems).toEqual([]);
      expect(requests.filter((url) => new URL(url).origin !== origin)).toEqual([]);
      await page.close();
    });
  });
});
