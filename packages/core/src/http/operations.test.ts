import { describe, expect, it } from 'vitest';
import { OPERATIONS, matchRoute, type RouteMatch } from './operations.js';
import { expectError, parse, request, testPetstore } from '../../test-support/petstore.js';

/** The operationId and params of a match, or its kind when it is not an operation. */
function summary(match: RouteMatch): unknown {
  return match.kind === 'operation' ? { operationId: match.operation.operationId, params: match.params } : match;
}

describe('matchRoute', () => {
  it.each([
    ['GET', '/categories', 'listCategories'],
    ['POST', '/categories', 'createCategory'],
    ['GET', '/store/orders', 'listStoreOrders'],
    ['GET', '/openapi.json', 'getOpenApiDocument'],
  ])('matches %s %s to %s without params', (method, path, operationId) => {
    expect(summary(matchRoute(method, path))).toEqual({ operationId, params: {} });
  });

  it('matches methods in any ASCII case, but never a non-ASCII spelling that upper-cases to one', () => {
    expect(summary(matchRoute('post', '/categories'))).toEqual({ operationId: 'createCategory', params: {} });
    expect(summary(matchRoute('pOsT', '/categories'))).toEqual({ operationId: 'createCategory', params: {} });
    expect('poſt'.toUpperCase()).toBe('POST');
    expect(matchRoute('poſt', '/categories')).toEqual({ kind: 'method_not_allowed', allow: 'GET, HEAD, POST' });
  });

  it('matches /pets/{petId} with the parameter', () => {
    expect(summary(matchRoute('GET', '/pets/42'))).toEqual({ operationId: 'getPetById', params: { petId: '42' } });
  });

  it('percent-decodes path parameters', () => {
    expect(summary(matchRoute('GET', '/pets/%34%32'))).toEqual({ operationId: 'getPetById', params: { petId: '42' } });
    expect(summary(matchRoute('GET', '/pets/caf%C3%A9'))).toEqual({ operationId: 'getPetById', params: { petId: 'café' } });
    expect(summary(matchRoute('GET', '/pets/1%2F2'))).toEqual({ operationId: 'getPetById', params: { petId: '1/2' } });
  });

  it.each(['/pets/%', '/pets/%zz', '/pets/%E0%A4%A', '/pets/%C3'])('answers not_found for bad percent-encoding in %s', (path) => {
    expect(matchRoute('GET', path)).toEqual({ kind: 'not_found' });
  });

  it('ignores the query string, even one that is not valid percent-encoding', () => {
    expect(summary(matchRoute('GET', '/categories?page=2'))).toEqual({ operationId: 'listCategories', params: {} });
    expect(summary(matchRoute('GET', '/pets/7?x=%zz'))).toEqual({ operationId: 'getPetById', params: { petId: '7' } });
  });

  it('matches HEAD as GET and methods in any case', () => {
    for (const path of ['/categories', '/pets/1', '/store/orders', '/openapi.json']) {
      const get = summary(matchRoute('GET', path));
      expect(summary(matchRoute('HEAD', path))).toEqual(get);
      expect(summary(matchRoute('head', path))).toEqual(get);
    }
    expect(summary(matchRoute('post', '/categories'))).toEqual({ operationId: 'createCategory', params: {} });
  });

  it.each([
    ['DELETE', '/categories', 'GET, HEAD, POST'],
    ['PUT', '/pets/1', 'GET, HEAD'],
    ['POST', '/store/orders', 'GET, HEAD'],
    ['POST', '/openapi.json', 'GET, HEAD'],
  ])('answers %s %s with method_not_allowed, Allow: %s', (method, path, allow) => {
    expect(matchRoute(method, path)).toEqual({ kind: 'method_not_allowed', allow });
  });

  it.each([
    '/categories/',
    '/pets/1/',
    '/pets/',
    '/pets',
    '/pets//1',
    '/store/orders/',
    '/store',
    '/openapi.json/',
    '/openapi',
    '/openapiXjson',
    '/Categories',
    '',
    '/',
  ])('answers not_found for %j', (path) => {
    expect(matchRoute('GET', path)).toEqual({ kind: 'not_found' });
  });

  it('lists every operation of the service once, with host and public flags', () => {
    expect(OPERATIONS.map((operation) => [operation.operationId, operation.method, operation.path, operation.host, operation.public])).toEqual([
      ['listCategories', 'GET', '/categories', false, false],
      ['createCategory', 'POST', '/categories', false, false],
      ['getPetById', 'GET', '/pets/{petId}', true, false],
      ['listStoreOrders', 'GET', '/store/orders', true, false],
      ['getOpenApiDocument', 'GET', '/openapi.json', false, true],
    ]);
    expect(Object.isFrozen(OPERATIONS)).toBe(true);
  });
});

describe('routing through handle', () => {
  it('answers 404 for bad percent-encoding in petId, with the rate-limit headers', async () => {
    const called: unknown[] = [];
    const { petstore } = testPetstore({ handlers: { getPetById: (context) => (called.push(context), { body: {} }) } });
    const response = await petstore.handle(request('/pets/%E0%A4%A'));
    expectError(response, 404, 'not_found');
    expect(response.headers['x-ratelimit-limit']).toBe('60');
    expect(called).toEqual([]);
  });

  it.each(['/pets/1/', '/store/orders/', '/openapi.json/'])('answers 404 for the trailing slash in %s', async (path) => {
    const { petstore } = testPetstore({ handlers: { getPetById: () => ({ body: {} }), listStoreOrders: () => ({ body: [] }) } });
    expectError(await petstore.handle(request(path)), 404, 'not_found');
  });

  it.each([
    ['/pets/1', 'GET, HEAD'],
    ['/store/orders', 'GET, HEAD'],
    ['/openapi.json', 'GET, HEAD'],
  ])('answers POST %s with 405 and Allow: %s', async (path, allow) => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(request(path, undefined, 'POST'));
    expectError(response, 405, 'method_not_allowed');
    expect(response.headers['allow']).toBe(allow);
    expect(response.headers['x-ratelimit-remaining']).toBe('59');
  });

  it('answers HEAD on a host operation like GET without a body', async () => {
    const { petstore } = testPetstore({ handlers: { listStoreOrders: () => ({ body: [{ id: 1 }], headers: { 'x-total': '1' } }) } });
    const get = await petstore.handle(request('/store/orders'));
    const head = await petstore.handle(request('/store/orders', undefined, 'HEAD'));
    expect(parse(get)).toEqual([{ id: 1 }]);
    expect(head.status).toBe(200);
    expect(head.body).toBeUndefined();
    expect(head.headers).toMatchObject({ 'content-type': 'application/json; charset=utf-8', 'x-total': '1' });
  });

  it('answers 401 before revealing whether a path exists', async () => {
    const { petstore } = testPetstore();
    expectError(await petstore.handle(request('/nowhere', {})), 401, 'unauthorized');
    expectError(await petstore.handle(request('/pets/1', {}, 'DELETE')), 401, 'unauthorized');
  });
});
