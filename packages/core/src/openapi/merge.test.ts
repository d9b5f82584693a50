import { describe, expect, it } from 'vitest';
import { testPetstore } from '../../test-support/petstore.js';
import { mergeOpenApiDocument } from './merge.js';

/** A host's own 3.0 document: one route, its own security, a tag. */
function hostDocument(openapi = '3.0.3'): Record<string, unknown> {
  return {
    openapi,
    info: { title: 'Host', version: '2.0.0' },
    servers: [{ url: 'https://api.example.com' }],
    security: [{ session: [] }],
    tags: [{ name: 'health', description: 'Probes' }, { name: 'pets', description: "The host's own description of pets" }],
    paths: { '/health': { get: { operationId: 'health', tags: ['health'], responses: { '200': { description: 'Up' } } } } },
    components: { securitySchemes: { session: { type: 'apiKey', in: 'cookie', name: 'sid' } } },
  };
}

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('mergeOpenApiDocument', () => {
  const { petstore } = testPetstore();

  it("adds every petstore operation under the prefix, next to the host's, with the petstore's security on each", () => {
    const merged = mergeOpenApiDocument(hostDocument(), petstore, { prefix: '/api/v1' }) as Json;
    expect(Object.keys(merged['paths'])).toEqual([
      '/health',
      '/api/v1/categories',
      '/api/v1/pets/{petId}',
      '/api/v1/store/orders',
      '/api/v1/openapi.json',
    ]);
    expect(Object.keys(merged['paths']['/api/v1/categories'])).toEqual(['get', 'post']);
    expect(merged['paths']['/api/v1/categories']['get']['operationId']).toBe('listCategories');
    expect(merged['paths']['/api/v1/pets/{petId}']['get']['deprecated']).toBe(true);
    // The host's document-wide security stays the host's; the petstore's operations name bearerAuth themselves.
    expect(merged['security']).toEqual([{ session: [] }]);
    expect(merged['paths']['/health']['get']['security']).toBeUndefined();
    expect(merged['paths']['/api/v1/categories']['get']['security']).toEqual([{ bearerAuth: [] }]);
    expect(merged['paths']['/api/v1/openapi.json']['get']['security']).toEqual([]);
    expect(Object.keys(merged['components']['securitySchemes'])).toEqual(['session', 'bearerAuth']);
    expect(Object.keys(merged['components']['schemas'])).toEqual(['Category', 'NewCategory', 'Error']);
    expect(merged['components']['headers']['X-RateLimit-Remaining']).toBeDefined();
    // Host's info, servers and version untouched; tags added unless the host has one of the name.
    expect(merged['openapi']).toBe('3.0.3');
    expect(merged['info']).toEqual({ title: 'Host', version: '2.0.0' });
    expect(merged['servers']).toEqual([{ url: 'https://api.example.com' }]);
    expect(merged['tags'].map((tag: Json) => [tag['name'], tag['description']])).toEqual([
      ['health', 'Probes'],
      ['pets', "The host's own description of pets"],
      ['categories', 'Species and breed categories used to classify pets.'],
      ['store', 'Store orders (handlers supplied by the host application).'],
      ['meta', 'This description.'],
    ]);
  });

  it("takes the petstore's prefix by default, or /v1 for a bare description", () => {
    const mounted = testPetstore({ prefix: '/pets-api' }).petstore;
    expect(Object.keys((mergeOpenApiDocument(hostDocument(), mounted) as Json)['paths'])).toContain('/pets-api/categories');
    expect(Object.keys((mergeOpenApiDocument(hostDocument(), petstore.openapi) as Json)['paths'])).toContain('/v1/categories');
  });

  it('changes neither input, and shares no object with them', () => {
    const host = hostDocument();
    const hostBefore = structuredClone(host);
    const description = structuredClone(petstore.openapi);
    const merged = mergeOpenApiDocument(host, description, { prefix: '/v1' }) as Json;
    expect(host).toEqual(hostBefore);
    expect(description).toEqual(petstore.openapi);
    merged['components']['schemas']['Category']['properties']['name']['maxLength'] = 1;
    merged['paths']['/health']['get']['operationId'] = 'changed';
    expect(description['components']).toEqual((petstore.openapi as Json)['components']);
    expect(host).toEqual(hostBefore);
  });

  it('refuses a path the host already has, compared as a template', () => {
    const host = hostDocument();
    (host['paths'] as Json)['/v1/pets/{id}'] = { get: { responses: { '200': { description: 'A pet' } } } };
    expect(() => mergeOpenApiDocument(host, petstore, { prefix: '/v1' })).toThrow(
      "mergeOpenApiDocument: the host document already has the path /v1/pets/{id}, where the petstore's /v1/pets/{petId} goes; mount the petstore under another prefix",
    );
  });

  it('accepts a component the host defines identically, refuses one it defines otherwise, and renames with componentPrefix', () => {
    const identical = hostDocument();
    (identical['components'] as Json)['securitySchemes']['bearerAuth'] = structuredClone((petstore.openapi as Json)['components']['securitySchemes']['bearerAuth']);
    expect(() => mergeOpenApiDocument(identical, petstore)).not.toThrow();

    const own = hostDocument();
    (own['components'] as Json)['schemas'] = { Error: { type: 'object', properties: { reason: { type: 'string' } } } };
    expect(() => mergeOpenApiDocument(own, petstore)).toThrow(
      "mergeOpenApiDocument: the host document's components.schemas.Error differs from the petstore's; pass componentPrefix (e.g. 'Petstore') to rename the petstore's components",
    );

    const merged = mergeOpenApiDocument(own, petstore, { componentPrefix: 'Petstore' }) as Json;
    expect(Object.keys(merged['components']['schemas'])).toEqual(['Error', 'PetstoreCategory', 'PetstoreNewCategory', 'PetstoreError']);
    expect(merged['components']['schemas']['Error']).toEqual({ type: 'object', properties: { reason: { type: 'string' } } });
    const list = merged['paths']['/v1/categories']['get'];
    expect(list['responses']['200']['content']['application/json']['schema']).toEqual({
      type: 'array',
      items: { $ref: '#/components/schemas/PetstoreCategory' },
    });
    expect(list['responses']['200']['headers']['X-RateLimit-Limit']).toEqual({ $ref: '#/components/headers/PetstoreX-RateLimit-Limit' });
    expect(list['security']).toEqual([{ PetstorebearerAuth: [] }]);
    expect(Object.keys(merged['components']['securitySchemes'])).toEqual(['session', 'PetstorebearerAuth']);
    // Every $ref of the result points at a component that exists.
    const refs = JSON.stringify(merged).match(/"\$ref":"[^"]+"/g) ?? [];
    expect(refs.length).toBeGreaterThan(10);
    for (const ref of refs) {
      const [, kind, name] = /#\/components\/([^/]+)\/([^"]+)"/.exec(ref) ?? [];
      expect(merged['components'][kind as string][name as string], ref).toBeDefined();
    }
  });

  it('rewrites the 3.0-only schema constructs for a 3.1 host document, and keeps 3.0 ones for a 3.0 host', () => {
    const description = structuredClone(petstore.openapi) as Json;
    description['components']['schemas']['Note'] = { type: 'string', nullable: true };
    description['components']['schemas']['Weight'] = { type: 'number', minimum: 0, exclusiveMinimum: true, maximum: 90, exclusiveMaximum: false };
    description['components']['schemas']['Anything'] = { nullable: true, description: 'any value or null' };
    const merged31 = mergeOpenApiDocument(hostDocument('3.1.0'), description) as Json;
    expect(merged31['openapi']).toBe('3.1.0');
    expect(merged31['components']['schemas']['Note']).toEqual({ type: ['string', 'null'] });
    expect(merged31['components']['schemas']['Weight']).toEqual({ type: 'number', exclusiveMinimum: 0, maximum: 90 });
    expect(merged31['components']['schemas']['Anything']).toEqual({ oneOf: [{ description: 'any value or null' }, { type: 'null' }] });
    expect(merged31['components']['schemas']['Category']).toEqual((petstore.openapi as Json)['components']['schemas']['Category']);
    const merged30 = mergeOpenApiDocument(hostDocument('3.0.3'), description) as Json;
    expect(merged30['components']['schemas']['Note']).toEqual({ type: 'string', nullable: true });
  });

  it('refuses documents that are not OpenAPI 3.0 or 3.1, and a malformed prefix', () => {
    expect(() => mergeOpenApiDocument({ swagger: '2.0', info: {}, paths: {} }, petstore)).toThrow(
      'mergeOpenApiDocument: the host document\'s openapi field is missing; OpenAPI 3.0.x and 3.1.x are supported',
    );
    expect(() => mergeOpenApiDocument(hostDocument('4.0.0'), petstore)).toThrow(/openapi field is "4\.0\.0"/);
    expect(() => mergeOpenApiDocument(hostDocument(), petstore, { prefix: 'v1/' })).toThrow(/prefix must be empty or start with "\/"/);
  });
});
