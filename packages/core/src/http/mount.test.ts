/**
 * Where the API is mounted (`PetstoreRequest.mountPath`, set by the adapters): the description's default server
 * and the traced route follow it; configured servers do not change with it.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { FREE_AUTH, parse, request, testPetstore } from '../../test-support/petstore.js';
import { PETSTORE_REQUEST_CHANNEL, type PetstoreRequestContext } from '../diagnostics.js';

const at = (path: string, mountPath: string | undefined) => ({ ...request(path, FREE_AUTH), mountPath });

/** The routes traced for the requests `run` sends. */
async function tracedRoutes(run: () => Promise<unknown>): Promise<Array<string | undefined>> {
  const routes: Array<string | undefined> = [];
  const onStart = (message: unknown) => routes.push((message as PetstoreRequestContext).route);
  subscribe(`tracing:${PETSTORE_REQUEST_CHANNEL}:start`, onStart);
  try {
    await run();
  } finally {
    unsubscribe(`tracing:${PETSTORE_REQUEST_CHANNEL}:start`, onStart);
  }
  return routes;
}

describe('mountPath', () => {

  it("names the request's mount as the description's one server, and the prefix when the request has none", async () => {
    const { petstore } = testPetstore();
    const serversAt = async (mountPath: string | undefined) => (parse(await petstore.handle(at('/openapi.json', mountPath))) as { servers: unknown }).servers;
    expect(await serversAt('/api/petstore')).toEqual([{ url: '/api/petstore', description: 'This server' }]);
    expect(await serversAt('')).toEqual([{ url: '/', description: 'This server' }]);
    expect(await serversAt(undefined)).toEqual([{ url: '/v1', description: 'This server' }]);
    expect(await serversAt('/v1')).toEqual([{ url: '/v1', description: 'This server' }]);
    expect(petstore.openapi['servers']).toEqual([{ url: '/v1', description: 'This server' }]);
    const { petstore: elsewhere } = testPetstore({ prefix: '/pets/api' });
    expect(elsewhere.openapi['servers']).toEqual([{ url: '/pets/api', description: 'This server' }]);
  });

  it('keeps configured servers wherever the request was mounted', async () => {
    const servers = [{ url: 'https://example.com/api/petstore', description: 'Production' }];
    const { petstore } = testPetstore({ openapi: { servers: { production: 'https://example.com/api/petstore' } } });
    expect((parse(await petstore.handle(at('/openapi.json', '/api/petstore'))) as { servers: unknown }).servers).toEqual(servers);
    expect((parse(await petstore.handle(at('/openapi.json', '/elsewhere'))) as { servers: unknown }).servers).toEqual(servers);
  });

  it('traces the route under the mount path: operations, the reference page and its files', async () => {
    const { petstore } = testPetstore({ docs: true });
    const routes = await tracedRoutes(async () => {
      await petstore.handle(at('/categories', '/api/petstore'));
      await petstore.handle(at('/pets/42', '/api/petstore'));
      await petstore.handle(at('/docs', '/api/petstore'));
      await petstore.handle(at('/docs/initializer.js', '/api/petstore'));
      await petstore.handle(at('/categories', undefined));
      await petstore.handle(at('/nothing-here', '/api/petstore'));
    });
    expect(routes).toEqual(['/api/petstore/categories', '/api/petstore/pets/{petId}', '/api/petstore/docs', '/api/petstore/docs/{file}', '/v1/categories', undefined]);
  });
});
