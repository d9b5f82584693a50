/**
 * createCategory with an Idempotency-Key, through the pipeline: the header's syntax, replays, a reused key, a
 * repeat in flight, the scope per API key, the fingerprint, the retention option, and the rate limit.
 */
import { describe, expect, it } from 'vitest';
import { hash } from 'node:crypto';
import { createPetstore } from './pipeline.js';
import { newCategoryFingerprint } from './idempotency.js';
import { NewCategorySchema, type NewCategory } from '../schemas.js';
import { FREE_KEY, ONE_PER_MINUTE_KEY, expectError, keyIdOf, parse, testPetstore } from '../../test-support/petstore.js';
import type { BodyReadResult, PetstoreHeaders, PetstoreRequest, PetstoreRequestBody } from './types.js';


function create(body: string | PetstoreRequestBody, idempotencyKey?: string | string[], apiKey = FREE_KEY): PetstoreRequest {
  const headers: Record<string, string | string[]> = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
  if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
  return {
    method: 'POST',
    path: '/categories',
    headers: headers as PetstoreHeaders,
    body: typeof body === 'string' ? { kind: 'bytes', bytes: body } : body,
    clientAddress: '203.0.113.7',
  };
}


describe('createCategory with Idempotency-Key', () => {
  it('creates once and replays the first answer, with Idempotent-Replayed: true, for the same key and body', async () => {
    const { petstore, categories } = testPetstore();
    const first = await petstore.handle(create('{"name":"Dogs","description":"Canine"}', '"order-1"'));
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    // Same NewCategory, other JSON spelling: the fingerprint is of the validated body.
    const again = await petstore.handle(create('{ "description": "Canine", "name": "Dogs" }', '"order-1"'));
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(parse(again)).toEqual(parse(first));
    expect(again.headers['x-ratelimit-remaining']).toBe(String(Number(first.headers['x-ratelimit-remaining']) - 1));
    expect(categories.records).toHaveLength(1);
  });

  it('answers 422 idempotency_key_reused for the same key with another body, creating nothing', async () => {
    const { petstore, categories } = testPetstore();
    expect((await petstore.handle(create('{"name":"Dogs"}', '"k"'))).status).toBe(201);
    const reused = await petstore.handle(create('{"name":"Cats"}', '"k"'));
    expectError(reused, 422, 'idempotency_key_reused');
    expect(categories.records.map((category) => category.name)).toEqual(['Dogs']);
  });

  it('answers 422 when only the description differs, or is left out, or sent empty: the whole body is the fingerprint', async () => {
    const { petstore, categories } = testPetstore();
    expect((await petstore.handle(create('{"name":"Dogs","description":"Canine"}', '"d"'))).status).toBe(201);
    for (const other of ['{"name":"Dogs","description":"Feline"}', '{"name":"Dogs"}', '{"name":"Dogs","description":""}']) {
      expectError(await petstore.handle(create(other, '"d"')), 422, 'idempotency_key_reused');
    }
    expect((await petstore.handle(create('{"name":"Birds"}', '"e"'))).status).toBe(201);
    expectError(await petstore.handle(create('{"name":"Birds","description":""}', '"e"')), 422, 'idempotency_key_reused');
    expect(categories.records.map((category) => category.name)).toEqual(['Dogs', 'Birds']);
  });

  it('fingerprints every field of NewCategory: a change to any one of them is another fingerprint', () => {
    const full: Record<string, string> = { name: 'Dogs', description: 'Canine' };
    // Every field the schema has is in `full`, so a field added to the schema fails here until it is covered.
    expect(Object.keys(NewCategorySchema.entries).sort()).toEqual(Object.keys(full).sort());
    const fingerprint = newCategoryFingerprint(full as NewCategory);
    for (const field of Object.keys(full)) {
      expect(newCategoryFingerprint({ ...full, [field]: `${full[field]} changed` } as NewCategory), field).not.toBe(fingerprint);
    }
    expect(newCategoryFingerprint({ name: 'Dogs' })).not.toBe(newCategoryFingerprint({ name: 'Dogs', description: '' }));
    expect(newCategoryFingerprint({ description: 'Canine', name: 'Dogs' })).toBe(fingerprint);
  });

  it('answers 409 idempotency_key_in_flight with Retry-After while the first create with the key is still being read', async () => {
    const { petstore, categories } = testPetstore();
    let release: (result: BodyReadResult) => void = () => undefined;
    let readStarted: () => void = () => undefined;
    const reading = new Promise<void>((resolve) => (readStarted = resolve));
    const slowBody: PetstoreRequestBody = {
      kind: 'stream',
      read: () => {
        readStarted();
        return new Promise<BodyReadResult>((resolve) => (release = resolve));
      },
    };
    const first = petstore.handle(create(slowBody, '"slow"'));
    await reading; // the first create is in flight, reading its body
    const repeat = await petstore.handle(create('{"name":"Slow"}', '"slow"'));
    expectError(repeat, 409, 'idempotency_key_in_flight');
    expect(repeat.headers['retry-after']).toBe('1');
    release({ ok: true, bytes: new TextEncoder().encode('{"name":"Slow"}') });
    expect((await first).status).toBe(201);
    // Once answered, the key replays.
    const after = await petstore.handle(create('{"name":"Slow"}', '"slow"'));
    expect(after.headers['idempotent-replayed']).toBe('true');
    expect(categories.records).toHaveLength(1);
  });

  it('lets a failed create be retried with its key: a validation error records nothing', async () => {
    const { petstore, categories } = testPetstore();
    expectError(await petstore.handle(create('{"nom":"Dogs"}', '"retry-me"')), 400, 'validation_failed');
    expect((await petstore.handle(create('{"name":"Dogs"}', '"retry-me"'))).status).toBe(201);
    expect(categories.records).toHaveLength(1);
  });

  it('scopes keys to the API key: another caller with the same key creates its own category', async () => {
    const { petstore, categories } = testPetstore();
    const mine = await petstore.handle(create('{"name":"Dogs"}', '"shared"'));
    const theirs = await petstore.handle(create('{"name":"Dogs"}', '"shared"', ONE_PER_MINUTE_KEY));
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    expect(theirs.headers['idempotent-replayed']).toBeUndefined();
    expect(categories.records).toHaveLength(2);
    // The store sees a fixed-length digest of (key id, idempotency key), never the key as sent.
    const [first, second] = categories.idempotentRequests;
    expect(first?.key).toBe(hash('sha256', JSON.stringify([keyIdOf(FREE_KEY), 'shared']), 'hex'));
    expect(second?.key).not.toBe(first?.key);
    expect(first?.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(first?.retentionMs).toBe(86_400_000);
  });

  it.each([
    ['a token, not a string', 'order-1'],
    ['an empty string', '""'],
    ['a string of 256 characters', `"${'k'.repeat(256)}"`],
    ['a non-ASCII character', '"cl\u00e9"'],
    ['parameters', '"k";a=1'],
    ['two items', '"a", "b"'],
    ['an unterminated string', '"abc'],
    ['a header sent twice', ['"a"', '"b"']],
    ['a huge value (refused before parsing)', `"${'\\\\'.repeat(100_000)}"`],
  ])('answers 400 invalid_idempotency_key for %s, before reading the body, and creates nothing', async (_what, value) => {
    const { petstore, categories } = testPetstore();
    let read = false;
    const body: PetstoreRequestBody = {
      kind: 'stream',
      read: async () => {
        read = true;
        return { ok: true, bytes: new TextEncoder().encode('{"name":"Dogs"}') };
      },
    };
    expectError(await petstore.handle(create(body, value)), 400, 'invalid_idempotency_key');
    expect(read).toBe(false);
    expect(categories.records).toHaveLength(0);
  });

  it('accepts 255 characters with escapes, and keys that differ only in escapes are the same key', async () => {
    const { petstore, categories } = testPetstore();
    const longest = `"${'a'.repeat(253)}\\"\\\\"`;
    expect((await petstore.handle(create('{"name":"Dogs"}', longest))).status).toBe(201);
    expect((await petstore.handle(create('{"name":"Dogs"}', ` ${longest} `))).headers['idempotent-replayed']).toBe('true');
    expect(categories.records).toHaveLength(1);
  });

  it('charges a replay to the rate limit like any request', async () => {
    const { petstore } = testPetstore();
    const answers = [];
    for (let i = 0; i < 2; i++) answers.push(await petstore.handle(create('{"name":"Dogs"}', '"tight"', ONE_PER_MINUTE_KEY)));
    expect(answers[0]?.status).toBe(201);
    expectError(answers[1] as never, 429, 'rate_limited');
  });

  it('passes idempotency.retentionMs to the store, and refuses a retention under 1 s when created', async () => {
    const { petstore, categories } = testPetstore({ idempotency: { retentionMs: 3_600_000 } });
    await petstore.handle(create('{"name":"Dogs"}', '"k"'));
    expect(categories.idempotentRequests[0]?.retentionMs).toBe(3_600_000);
    const { categories: store } = testPetstore();
    expect(() => createPetstore({ apiKeys: { findPrincipal: async () => undefined }, categories: store, rateLimit: {}, idempotency: { retentionMs: 10 } } as never)).toThrow(
      /idempotency\.retentionMs must be at least 1000/,
    );
  });
});
