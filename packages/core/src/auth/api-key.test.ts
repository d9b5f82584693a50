import { describe, expect, it } from 'vitest';
import { apiKeyHashesEqual, hashApiKey, staticApiKeys } from './api-key.js';

describe('hashApiKey', () => {
  it('gives a 32-byte digest, the same for the same key and different for another', () => {
    const digest = hashApiKey('secret-key');
    expect(digest.byteLength).toBe(32);
    expect(hashApiKey('secret-key').equals(digest)).toBe(true);
    expect(hashApiKey('secret-kez').equals(digest)).toBe(false);
  });
});

describe('apiKeyHashesEqual', () => {
  const digest = hashApiKey('secret-key');

  it('is true for equal digests and false for different ones', () => {
    expect(apiKeyHashesEqual(digest, hashApiKey('secret-key'))).toBe(true);
    expect(apiKeyHashesEqual(digest, hashApiKey('other-key'))).toBe(false);
  });

  it('is false, without throwing, for digests of another length', () => {
    expect(apiKeyHashesEqual(digest, digest.subarray(0, 31))).toBe(false);
    expect(apiKeyHashesEqual(digest.subarray(0, 31), digest)).toBe(false);
    expect(apiKeyHashesEqual(digest, new Uint8Array(33))).toBe(false);
    expect(apiKeyHashesEqual(new Uint8Array(0), new Uint8Array(0))).toBe(false);
  });
});

describe('staticApiKeys', () => {
  const keys = [
    { key: 'free-key', plan: 'free' as const },
    { key: 'pro-key', plan: 'pro' as const, accountId: 'acct-42' },
    {
      key: 'enterprise-key',
      plan: 'enterprise' as const,
      limits: { requestsPerMinute: 5_000, requestsPerDay: 2_000_000 },
    },
  ];

  it('finds a principal by its keyId, and nothing for an unknown keyId', async () => {
    const store = staticApiKeys(keys);
    const pro = await store.findPrincipal(hashApiKey('pro-key'));
    expect(pro).toBeDefined();
    expect(await store.findByKeyId?.(pro?.keyId ?? '')).toBe(pro);
    expect(await store.findByKeyId?.('pro-key')).toBeUndefined();
    expect(await store.findByKeyId?.('__proto__')).toBeUndefined();
  });

  it('resolves each key to its own principal', async () => {
    const store = staticApiKeys(keys);
    expect(await store.findPrincipal(hashApiKey('free-key'))).toMatchObject({ plan: 'free' });
    expect(await store.findPrincipal(hashApiKey('pro-key'))).toMatchObject({ plan: 'pro', accountId: 'acct-42' });
  });

  it('answers undefined for an unknown key or a digest of the wrong length', async () => {
    const store = staticApiKeys(keys);
    expect(await store.findPrincipal(hashApiKey('free-key '))).toBeUndefined();
    expect(await store.findPrincipal(hashApiKey('free-key').subarray(0, 16))).toBeUndefined();
    expect(await store.findPrincipal(new Uint8Array(0))).toBeUndefined();
  });

  it('gives a keyId that is not the key, is stable across stores, and differs per key', async () => {
    const first = await staticApiKeys(keys).findPrincipal(hashApiKey('free-key'));
    const again = await staticApiKeys([{ key: 'free-key', plan: 'pro' }]).findPrincipal(hashApiKey('free-key'));
    const other = await staticApiKeys(keys).findPrincipal(hashApiKey('pro-key'));
    expect(first?.keyId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(first?.keyId).not.toContain('free-key');
    expect(again?.keyId).toBe(first?.keyId);
    expect(other?.keyId).not.toBe(first?.keyId);
  });

  it('uses the keyId as accountId when none is given', async () => {
    const principal = await staticApiKeys(keys).findPrincipal(hashApiKey('free-key'));
    expect(principal?.accountId).toBe(principal?.keyId);
  });

  it('carries enterprise custom limits through', async () => {
    const principal = await staticApiKeys(keys).findPrincipal(hashApiKey('enterprise-key'));
    expect(principal).toMatchObject({
      plan: 'enterprise',
      limits: { requestsPerMinute: 5_000, requestsPerDay: 2_000_000 },
    });
  });

  it('does not let later changes to the configuration change a principal', async () => {
    const limits = { requestsPerMinute: 10, requestsPerDay: 100 };
    const store = staticApiKeys([{ key: 'k', plan: 'enterprise', limits }]);
    limits.requestsPerMinute = 1_000_000;
    expect((await store.findPrincipal(hashApiKey('k')))?.limits?.requestsPerMinute).toBe(10);
  });

  it('throws a TypeError for a key listed twice', () => {
    expect(() =>
      staticApiKeys([
        { key: 'same', plan: 'free' },
        { key: 'same', plan: 'pro' },
      ]),
    ).toThrow(TypeError);
  });

  it('throws a TypeError for an empty key', () => {
    expect(() => staticApiKeys([{ key: '', plan: 'free' }])).toThrow(TypeError);
  });

  it('never puts the key in an error message', () => {
    let message = '';
    try {
      staticApiKeys([
        { key: 'do-not-print-me', plan: 'free' },
        { key: 'do-not-print-me', plan: 'free' },
      ]);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).not.toBe('');
    expect(message).not.toContain('do-not-print-me');
  });
});
