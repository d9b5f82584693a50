import { describe, expect, it } from 'vitest';
import {
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  describeStorage,
  parseApiKeys,
  parseOperationCosts,
  parseRateLimitAlgorithms,
  readConfig,
  serverTimeouts,
  startupBanner,
} from './config.js';

describe('example configuration', () => {
  it('defaults to 127.0.0.1:3000 and creates a free demo key when PETSTORE_API_KEYS is unset', () => {
    const config = readConfig({});
    expect(config.port).toBe(3000);
    expect(config.host).toBe('127.0.0.1');
    expect(config.demoKey).toMatch(/^demo_[A-Za-z0-9_-]{24}$/);
    expect(config.apiKeys).toEqual([{ key: config.demoKey, plan: 'free', accountId: 'demo' }]);
    expect(readConfig({}).demoKey).not.toBe(config.demoKey);
  });

  it('reads the storage URLs and the failure policy (PETSTORE_STORE_FAILURE, or its older name PETSTORE_REDIS_FAILURE)', () => {
    const config = readConfig({ PETSTORE_DATABASE_URL: ' postgres://app:pw@db/petstore ', PETSTORE_STORE_FAILURE: 'open' });
    expect(config).toMatchObject({ databaseUrl: 'postgres://app:pw@db/petstore', redisUrl: undefined, storeFailure: 'fail-open' });
    expect(readConfig({}).storeFailure).toBe('fail-closed');
    expect(readConfig({ PETSTORE_REDIS_FAILURE: 'open' }).storeFailure).toBe('fail-open');
    expect(readConfig({ PETSTORE_STORE_FAILURE: 'closed', PETSTORE_REDIS_FAILURE: 'open' }).storeFailure).toBe('fail-closed');
    expect(() => readConfig({ PETSTORE_STORE_FAILURE: 'maybe' })).toThrow('PETSTORE_STORE_FAILURE must be "closed" or "open"');
    expect(() => readConfig({ PETSTORE_REDIS_FAILURE: 'maybe' })).toThrow('PETSTORE_REDIS_FAILURE must be');
  });

  it('reads PETSTORE_CALL_TIMEOUT_MS, the stores\' deadline (default 500 ms), and refuses anything but positive whole ms', () => {
    expect(readConfig({}).callTimeoutMs).toBe(500);
    expect(readConfig({ PETSTORE_CALL_TIMEOUT_MS: '' }).callTimeoutMs).toBe(500);
    expect(readConfig({ PETSTORE_CALL_TIMEOUT_MS: ' 2000 ' }).callTimeoutMs).toBe(2000);
    for (const bad of ['0', '-1', '1.5', '2s', '1e3']) {
      expect(() => readConfig({ PETSTORE_CALL_TIMEOUT_MS: bad }), bad).toThrow(`PETSTORE_CALL_TIMEOUT_MS must be a positive whole number of milliseconds, not "${bad}"`);
    }
  });

  it('reads PETSTORE_METRICS_PORT: unset means no metrics endpoint, anything but a port number is refused', () => {
    expect(readConfig({}).metricsPort).toBeUndefined();
    expect(readConfig({ PETSTORE_METRICS_PORT: '' }).metricsPort).toBeUndefined();
    expect(readConfig({ PETSTORE_METRICS_PORT: ' 9464 ' }).metricsPort).toBe(9464);
    expect(readConfig({ PETSTORE_METRICS_PORT: '0' }).metricsPort).toBe(0);
    for (const bad of ['-1', '65536', '94.64', 'metrics']) {
      expect(() => readConfig({ PETSTORE_METRICS_PORT: bad }), bad).toThrow('PETSTORE_METRICS_PORT must be a port number (0-65535)');
    }
  });

  it('says where the data lives, without passwords', () => {
    expect(describeStorage({ databaseUrl: undefined, redisUrl: undefined })).toBe('memory storage');
    expect(describeStorage({ databaseUrl: 'postgres://app:s3cret@db:5432/petstore', redisUrl: undefined })).toBe(
      'PostgreSQL storage (postgres://app:***@db:5432/petstore)',
    );
    expect(describeStorage({ databaseUrl: 'postgres://db/petstore', redisUrl: 'redis://:s3cret@cache:6379' })).toBe(
      'PostgreSQL storage for categories (postgres://db/petstore), Redis storage for rate limits (redis://:***@cache:6379)',
    );
  });

  it('reads PETSTORE_OPERATION_COSTS as name=units pairs', () => {
    expect(readConfig({}).operationCosts).toBeUndefined();
    expect(readConfig({ PETSTORE_OPERATION_COSTS: ' createCategory=5, listCategories = 1 ,guard=3,' }).operationCosts).toEqual({
      createCategory: 5,
      listCategories: 1,
      guard: 3,
    });
  });

  it.each([
    ['createCategory', /entry 1 \("createCategory"\): expected name=units, such as createCategory=5/],
    ['createCategory=0', /entry 1 \("createCategory=0"\): the units must be a whole number >= 1/],
    ['createCategory=2.5', /expected name=units/],
    ['createCategory=-1', /expected name=units/],
    ['listCategories=1,listCategories=2', /entry 2 \("listCategories=2"\): listCategories is given twice/],
    ['toString=1', /toString is not one of listCategories, createCategory/],
  ])('refuses PETSTORE_OPERATION_COSTS=%s, naming the entry', (text, message) => {
    expect(() => parseOperationCosts(text)).toThrow(message);
  });

  it('reads PETSTORE_RATE_LIMIT_ALGORITHM: an algorithm for every plan, and plan:algorithm (anonymous:algorithm) beside it', () => {
    expect(readConfig({}).rateLimitAlgorithms).toBeUndefined();
    expect(readConfig({ PETSTORE_RATE_LIMIT_ALGORITHM: ' ' }).rateLimitAlgorithms).toBeUndefined();
    expect(readConfig({ PETSTORE_RATE_LIMIT_ALGORITHM: 'sliding' }).rateLimitAlgorithms).toEqual({ algorithm: 'sliding', plans: {}, anonymous: undefined });
    expect(readConfig({ PETSTORE_RATE_LIMIT_ALGORITHM: ' gcra, free : sliding ,anonymous:fixed,enterprise:fixed,' }).rateLimitAlgorithms).toEqual({
      algorithm: 'gcra',
      plans: { free: 'sliding', enterprise: 'fixed' },
      anonymous: 'fixed',
    });
    // Per plan only: the other plans keep the default (fixed).
    expect(parseRateLimitAlgorithms('pro:gcra')).toEqual({ algorithm: undefined, plans: { pro: 'gcra' }, anonymous: undefined });
  });

  it.each([
    ['slidng', /^PETSTORE_RATE_LIMIT_ALGORITHM entry 1 \("slidng"\): slidng is not one of fixed, sliding, gcra$/],
    ['GCRA', /entry 1 \("GCRA"\): GCRA is not one of fixed, sliding, gcra/],
    ['gcra,gold:sliding', /entry 2 \("gold:sliding"\): gold is not one of free, pro, business, enterprise, anonymous/],
    ['free:', /entry 1 \("free:"\): \(empty\) is not one of fixed, sliding, gcra/],
    [':gcra', /entry 1 \(":gcra"\): expected an algorithm \(fixed, sliding, gcra\) or plan:algorithm, such as free:sliding/],
    ['free:gcra:1', /expected an algorithm/],
    ['gcra,sliding', /entry 2 \("sliding"\): the algorithm of every plan is given twice/],
    ['free:gcra,free:fixed', /entry 2 \("free:fixed"\): free is given twice/],
    ['anonymous:gcra,anonymous:gcra', /anonymous is given twice/],
    ['toString:gcra', /toString is not one of free, pro/],
  ])('refuses PETSTORE_RATE_LIMIT_ALGORITHM=%s, naming the variable and the entry', (text, message) => {
    expect(() => readConfig({ PETSTORE_RATE_LIMIT_ALGORITHM: text })).toThrow(message);
  });

  it('says the rate-limit algorithms at start-up when PETSTORE_RATE_LIMIT_ALGORITHM is set', () => {
    const lines = (env: NodeJS.ProcessEnv) => startupBanner(readConfig(env), 'http://127.0.0.1:3000', 'Fastify').split('\n');
    expect(lines({ PETSTORE_RATE_LIMIT_ALGORITHM: 'gcra,free:sliding,anonymous:fixed' })).toContain(
      'Rate-limit algorithm (PETSTORE_RATE_LIMIT_ALGORITHM): gcra; free: sliding; anonymous: fixed',
    );
    expect(lines({ PETSTORE_RATE_LIMIT_ALGORITHM: 'pro:sliding' })).toContain('Rate-limit algorithm (PETSTORE_RATE_LIMIT_ALGORITHM): fixed; pro: sliding');
    expect(lines({}).join('\n')).not.toContain('PETSTORE_RATE_LIMIT_ALGORITHM');
  });

  it('reads key:plan pairs and enterprise custom limits', () => {
    expect(parseApiKeys(' a:free, b:pro ,c:business,d:enterprise, e:enterprise:5000:900000 ,')).toEqual([
      { key: 'a', plan: 'free' },
      { key: 'b', plan: 'pro' },
      { key: 'c', plan: 'business' },
      { key: 'd', plan: 'enterprise' },
      { key: 'e', plan: 'enterprise', limits: { requestsPerMinute: 5000, requestsPerDay: 900000 } },
    ]);
  });

  it('rejects bad entries by position without echoing the key', () => {
    expect(() => parseApiKeys('ok:free,s3cret:gold')).toThrow('PETSTORE_API_KEYS entry 2: plan must be one of');
    expect(() => parseApiKeys('s3cret')).toThrow('entry 1: expected key:plan');
    expect(() => parseApiKeys('s3cret:free:1:2')).toThrow('custom limits');
    expect(() => parseApiKeys('s3cret:enterprise:x:2')).toThrow('custom limits');
    try {
      parseApiKeys('s3cret:gold');
    } catch (error) {
      expect(String(error)).not.toContain('s3cret');
    }
    expect(() => readConfig({ PORT: 'eighty' })).toThrow('PORT');
  });

  it('prints a KEY=… line to paste as it is, and curl lines that use $KEY, for the demo key only', () => {
    const demo = readConfig({});
    const banner = startupBanner(demo, 'http://127.0.0.1:3000', 'Fastify');
    // A whole line, nothing before or after it, and nothing a shell would expand or split.
    expect(banner.split('\n')).toContain(`KEY=${demo.demoKey}`);
    expect(demo.demoKey).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(banner).toContain(`curl -i -H "Authorization: Bearer $KEY" http://127.0.0.1:3000/v1/categories`);
    expect(banner.split('\n')).toContain('API reference (open it in a browser): http://127.0.0.1:3000/v1/docs');
    const configured = readConfig({ PETSTORE_API_KEYS: 'topsecret:pro' });
    expect(startupBanner(configured, 'http://127.0.0.1:3000', 'Express')).not.toContain('topsecret');
  });

  it('tells how to issue a managed key when the keys live in PostgreSQL or Redis, and not on memory storage', () => {
    const lines = (env: NodeJS.ProcessEnv) => startupBanner(readConfig(env), 'http://127.0.0.1:3000', 'Fastify').split('\n');
    const issue = '  npx petstore keys issue --account acme --plan free';
    expect(lines({ PETSTORE_DATABASE_URL: 'postgres://127.0.0.1/petstore', PETSTORE_REDIS_URL: 'redis://127.0.0.1:6379' })).toEqual(
      expect.arrayContaining(['Managed API keys are read from PostgreSQL: issue one with the same PETSTORE_DATABASE_URL set, e.g.', issue]),
    );
    expect(lines({ PETSTORE_REDIS_URL: 'redis://127.0.0.1:6379' })).toEqual(
      expect.arrayContaining(['Managed API keys are read from Redis: issue one with the same PETSTORE_REDIS_URL set, e.g.', issue]),
    );
    expect(lines({}).join('\n')).not.toContain('Managed API keys');
    // Limits in Redis, keys in PostgreSQL: the operator's limit commands need the Redis URL as well.
    const limitsInRedis = 'Rate limits are kept in Redis: petstore limits show|reset needs PETSTORE_REDIS_URL set too.';
    expect(lines({ PETSTORE_DATABASE_URL: 'postgres://127.0.0.1/petstore', PETSTORE_REDIS_URL: 'redis://127.0.0.1:6379' })).toContain(limitsInRedis);
    expect(lines({ PETSTORE_DATABASE_URL: 'postgres://127.0.0.1/petstore' })).not.toContain(limitsInRedis);
  });

  it('reads HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS (default 10 s and 30 s), and refuses anything but positive whole ms', () => {
    expect(readConfig({})).toMatchObject({ headersTimeoutMs: 10_000, requestTimeoutMs: 30_000 });
    expect([DEFAULT_HEADERS_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS]).toEqual([10_000, 30_000]);
    expect(readConfig({ HEADERS_TIMEOUT_MS: ' 2500 ', REQUEST_TIMEOUT_MS: '' })).toMatchObject({ headersTimeoutMs: 2500, requestTimeoutMs: 30_000 });
    expect(readConfig({ HEADERS_TIMEOUT_MS: '5000', REQUEST_TIMEOUT_MS: '5000' })).toMatchObject({ headersTimeoutMs: 5000, requestTimeoutMs: 5000 });
    for (const bad of ['0', '-1', '1.5', '1e4', '10s', 'abc', '9007199254740993']) {
      expect(() => readConfig({ HEADERS_TIMEOUT_MS: bad })).toThrow(`HEADERS_TIMEOUT_MS must be a positive whole number of milliseconds, not "${bad}"`);
      expect(() => readConfig({ REQUEST_TIMEOUT_MS: bad })).toThrow(`REQUEST_TIMEOUT_MS must be a positive whole number of milliseconds, not "${bad}"`);
    }
    // Node refuses a headers timeout longer than the request timeout; so does the configuration, by name.
    expect(() => readConfig({ HEADERS_TIMEOUT_MS: '40000' })).toThrow('HEADERS_TIMEOUT_MS (40000) must not exceed REQUEST_TIMEOUT_MS (30000)');
  });

  it('gives Node both timeouts and checks for expired connections every second, or at each shorter headers timeout', () => {
    expect(serverTimeouts(readConfig({}))).toEqual({ headersTimeout: 10_000, requestTimeout: 30_000, connectionsCheckingInterval: 1000 });
    expect(serverTimeouts({ headersTimeoutMs: 300, requestTimeoutMs: 600 })).toEqual({
      headersTimeout: 300,
      requestTimeout: 600,
      connectionsCheckingInterval: 300,
    });
  });

  it('reads the Production and Staging addresses of the OpenAPI description, each ending in /v1', () => {
    expect(readConfig({}).openapiServers).toBeUndefined();
    expect(readConfig({ PETSTORE_PUBLIC_URL: ' ', PETSTORE_STAGING_URL: '' }).openapiServers).toBeUndefined();
    expect(
      readConfig({ PETSTORE_PUBLIC_URL: 'https://api.example.com/v1', PETSTORE_STAGING_URL: 'https://staging.example.com/petstore/v1/' }).openapiServers,
    ).toEqual({ production: 'https://api.example.com/v1', staging: 'https://staging.example.com/petstore/v1/' });
    expect(readConfig({ PETSTORE_STAGING_URL: 'http://127.0.0.1:3001/v1' }).openapiServers).toEqual({ staging: 'http://127.0.0.1:3001/v1' });
    for (const bad of ['/v1', 'api.example.com/v1', 'https://api.example.com', 'https://api.example.com/v1/categories', 'https://api.example.com/v10', 'ftp://api.example.com/v1']) {
      expect(() => readConfig({ PETSTORE_PUBLIC_URL: bad })).toThrow(`PETSTORE_PUBLIC_URL must be an absolute http(s) URL ending in /v1, such as https://api.example.com/v1, not "${bad}"`);
      expect(() => readConfig({ PETSTORE_STAGING_URL: bad })).toThrow('PETSTORE_STAGING_URL must be an absolute http(s) URL ending in /v1');
    }
  });
});
