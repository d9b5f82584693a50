/**
 * Callers without a valid key: who they are for the anonymous limits (the client address, or what the host
 * says), and the warning when nobody can tell them apart.
 */
import { describe, expect, it, vi } from 'vitest';
import { testRateLimitStore } from '../../test-support/rate-limit-store.js';
import type { PetstoreLogger } from './events.js';
import { CLIENT_ADDRESS, request, testPetstore } from '../../test-support/petstore.js';
import type { PetstoreRequest } from './types.js';

const anonymous = (clientAddress: string | undefined, logger?: PetstoreLogger): PetstoreRequest => ({
  method: 'GET',
  path: '/categories',
  headers: {},
  clientAddress,
  logger,
});

const remaining = (headers: Record<string, string>) => Number(headers['x-ratelimit-remaining']);

describe('callers without a usable client address', () => {
  it.each([
    ['no address', undefined],
    ['an address that does not parse', 'not-an-address'],
  ])('share one counter, and the host is warned once, with the code and the fix (%s)', async (_label, address) => {
    const { petstore, warnings } = testPetstore();
    const first = await petstore.handle(anonymous(address));
    const second = await petstore.handle(anonymous(undefined));
    expect(remaining(second.headers)).toBe(remaining(first.headers) - 1);
    expect(warnings).toEqual([{ code: 'PETSTORE_NO_CLIENT_ADDRESS', message: expect.stringMatching(/trustProxy.*'trust proxy'.*rateLimit\.anonymousKey/s) }]);
  });

  it('are not warned about while every caller has an address', async () => {
    const { petstore, warnings } = testPetstore();
    await petstore.handle(anonymous('203.0.113.1'));
    await petstore.handle(anonymous('2001:db8::1'));
    expect(warnings).toEqual([]);
  });

  it("quotes a bad address cut short, never a header's worth", async () => {
    const { petstore, warnings } = testPetstore();
    await petstore.handle(anonymous(`x${'y'.repeat(10_000)}`));
    expect(warnings[0]?.message.length).toBeLessThan(500);
  });

  it("warn through the request's logger when the host gave no onWarning", async () => {
    const { petstore } = testPetstore({ onWarning: undefined });
    const logger = { info: vi.fn(), warn: vi.fn(), error: vi.fn() };
    await petstore.handle(anonymous(undefined, logger));
    await petstore.handle(anonymous(undefined, logger));
    expect(logger.warn).toHaveBeenCalledTimes(1);
    expect(logger.warn).toHaveBeenCalledWith({ petstore: { warning: 'PETSTORE_NO_CLIENT_ADDRESS' } }, expect.stringContaining('trustProxy'));
  });

  it('warn on console.warn when there is neither onWarning nor a logger', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      const { petstore } = testPetstore({ onWarning: undefined });
      await petstore.handle(anonymous(undefined));
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0]?.[0]).toMatch(/^\[petstore\] PETSTORE_NO_CLIENT_ADDRESS: /);
    } finally {
      warn.mockRestore();
    }
  });
});

describe('rateLimit.anonymousKey', () => {
  it('decides who an anonymous caller is from the request, instead of the client address', async () => {
    const { petstore, warnings } = testPetstore({
      rateLimit: {
        store: testRateLimitStore(),
        anonymousKey: (seen) => (typeof seen.headers['x-device'] === 'string' ? `device:${seen.headers['x-device']}` : seen.clientAddress),
      },
    });
    const fromDevice = (device: string) => petstore.handle({ ...anonymous(CLIENT_ADDRESS), headers: { 'x-device': device } });
    const a1 = await fromDevice('a');
    const a2 = await fromDevice('a');
    const b1 = await fromDevice('b');
    expect(remaining(a2.headers)).toBe(remaining(a1.headers) - 1);
    expect(remaining(b1.headers)).toBe(remaining(a1.headers)); // another device, one address
    expect(warnings).toEqual([]);
  });

  it('puts callers it answers no key for in the shared counter, and warns once', async () => {
    const { petstore, warnings } = testPetstore({
      rateLimit: { store: testRateLimitStore(), anonymousKey: () => undefined },
    });
    const first = await petstore.handle(anonymous('203.0.113.1'));
    const second = await petstore.handle(anonymous('203.0.113.2'));
    expect(remaining(second.headers)).toBe(remaining(first.headers) - 1);
    expect(warnings.map((warning) => warning.code)).toEqual(['PETSTORE_NO_CLIENT_ADDRESS']);
  });

  it('is not asked about callers with a valid key', async () => {
    const anonymousKey = vi.fn(() => 'someone');
    const { petstore } = testPetstore({
      rateLimit: { store: testRateLimitStore(), anonymousKey },
    });
    expect((await petstore.handle(request('/categories'))).status).toBe(200);
    expect(anonymousKey).not.toHaveBeenCalled();
  });
});
