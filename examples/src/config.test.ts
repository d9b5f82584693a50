import { describe, expect, it } from 'vitest';
import { describeStorage, parseApiKeys, readConfig, startupBanner } from './config.js';

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

  it('says where the data lives, without passwords', () => {
    expect(describeStorage({ databaseUrl: undefined, redisUrl: undefined })).toBe('memory storage');
    expect(describeStorage({ databaseUrl: 'postgres://app:s3cret@db:5432/petstore', redisUrl: undefined })).toBe(
      'PostgreSQL storage (postgres://app:***@db:5432/petstore)',
    );
    expect(describeStorage({ databaseUrl: 'postgres://db/petstore', redisUrl: 'redis://:s3cret@cache:6379' })).toBe(
      'PostgreSQL storage for categories (postgres://db/petstore), Redis storage for rate limits (redis://:***@cache:6379)',
    );
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
    const configured = readConfig({ PETSTORE_API_KEYS: 'topsecret:pro' });
    expect(startupBanner(configured, 'http://127.0.0.1:3000', 'Express')).not.toContain('topsecret');
  });
});
