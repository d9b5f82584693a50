/**
 * The petstore's operations inside a host's own OpenAPI document (docs/reference-page.md, "The host's own OpenAPI
 * document"): on Fastify, with @fastify/swagger registered by the host and its `transformObject` calling
 * mergeOpenApiDocument; on Express, a merged document served by swagger-ui-express. Each result passes
 * @readme/openapi-parser validation.
 */
import type { AddressInfo } from 'node:net';
import swagger from '@fastify/swagger';
import { compileErrors, validate } from '@readme/openapi-parser';
import { petstoreExpress } from '@petstore/adapter-express';
import { petstoreFastify } from '@petstore/adapter-fastify';
import { createPetstore, mergeOpenApiDocument, staticApiKeys } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import express from 'express';
import Fastify from 'fastify';
import swaggerUi from 'swagger-ui-express';
import { describe, expect, it } from 'vitest';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function petstore() {
  return createPetstore({
    apiKeys: staticApiKeys([{ key: 'host-document-key', plan: 'free' }]),
    categories: memoryCategoryStore(),
    rateLimit: { store: memoryRateLimitStore() },
  });
}

async function expectValid(document: Json) {
  const result = await validate(structuredClone(document) as Parameters<typeof validate>[0]);
  expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
  expect(result.warnings).toEqual([]);
}

const PETSTORE_PATHS = ['/v1/categories', '/v1/pets/{petId}', '/v1/store/orders', '/v1/openapi.json'];

describe("the host's own OpenAPI document", () => {
  for (const version of ['3.0.3', '3.1.0']) {
    it(`Fastify + @fastify/swagger (OpenAPI ${version}): the host's route and the petstore's operations, schemas and security scheme`, async () => {
      const api = petstore();
      const app = Fastify();
      await app.register(swagger, {
        openapi: { openapi: version, info: { title: 'Pet shop', version: '3.2.0' } },
        // The one call: the petstore's operations into the document @fastify/swagger builds from the host's routes.
        transformObject: (document) =>
          'openapiObject' in document ? mergeOpenApiDocument(document.openapiObject, api, { prefix: '/v1' }) : document.swaggerObject,
      });
      app.get(
        '/health',
        { schema: { tags: ['health'], response: { 200: { type: 'object', properties: { ok: { type: 'boolean' } } } } } },
        async () => ({ ok: true }),
      );
      await app.register(petstoreFastify, { prefix: '/v1', petstore: api });
      await app.ready();
      const document = app.swagger() as Json;
      expect(document['openapi']).toBe(version);
      // No catch-all route of the plugin (/v1/*, /v1/): it hides them from @fastify/swagger.
      expect(Object.keys(document['paths'])).toEqual(['/health', ...PETSTORE_PATHS]);
      expect(document['paths']['/v1/categories']['post']['operationId']).toBe('createCategory');
      expect(document['paths']['/v1/categories']['get']['security']).toEqual([{ bearerAuth: [] }]);
      expect(document['paths']['/health']['get']['security']).toBeUndefined();
      expect(Object.keys(document['components']['schemas'])).toEqual(['Category', 'NewCategory', 'Error']);
      expect(document['components']['securitySchemes']).toEqual({ bearerAuth: expect.objectContaining({ type: 'http', scheme: 'bearer' }) });
      await expectValid(document);
      // The routes still answer (hiding them from the document changes nothing else).
      expect((await app.inject({ url: '/v1/categories', headers: { authorization: 'Bearer host-document-key' } })).statusCode).toBe(200);
      await app.close();
    });
  }

  it('Express + swagger-ui-express: a merged 3.1 document, served as swagger-ui-express serves it', async () => {
    const api = petstore();
    const hostDocument = {
      openapi: '3.1.0',
      info: { title: 'Pet shop', version: '3.2.0' },
      paths: { '/health': { get: { operationId: 'health', responses: { '200': { description: 'Up' } } } } },
    };
    const merged = mergeOpenApiDocument(hostDocument, api, { prefix: '/v1' }) as Json;
    await expectValid(merged);
    const app = express();
    app.use('/v1', petstoreExpress({ petstore: api }));
    app.use('/api-docs', swaggerUi.serve, swaggerUi.setup(merged));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      expect((await fetch(`${origin}/api-docs/`)).status).toBe(200);
      // swagger-ui-express hands the document to Swagger UI in this script, as JSON in its options.
      const script = await (await fetch(`${origin}/api-docs/swagger-ui-init.js`)).text();
      const options = JSON.parse(/var options = (\{[^]*?\n\});?\n/.exec(script)?.[1] ?? 'null') as Json;
      expect(options['swaggerDoc']).toEqual(merged);
      expect(Object.keys(options['swaggerDoc']['paths'])).toEqual(['/health', ...PETSTORE_PATHS]);
      expect((await fetch(`${origin}/v1/categories`, { headers: { authorization: 'Bearer host-document-key' } })).status).toBe(200);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
