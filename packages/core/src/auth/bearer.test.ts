import { describe, expect, it } from 'vitest';
import { MAX_API_KEY_LENGTH, bearerChallenge, readBearerCredential } from './bearer.js';

describe('readBearerCredential', () => {
  it.each(['Bearer abc', 'bearer abc', 'BEARER  abc', '  Bearer abc  '])('reads the token from %j', (header) => {
    expect(readBearerCredential(header)).toEqual({ kind: 'token', token: 'abc' });
  });

  it('accepts every b64token character, with trailing "="', () => {
    const token = 'Az09-._~+/==';
    expect(readBearerCredential(`Bearer ${token}`)).toEqual({ kind: 'token', token });
  });

  it('answers missing without a header', () => {
    expect(readBearerCredential(undefined)).toEqual({ kind: 'missing' });
    expect(readBearerCredential([])).toEqual({ kind: 'missing' });
    expect(readBearerCredential('')).toEqual({ kind: 'missing' });
  });

  it('answers missing for another scheme', () => {
    expect(readBearerCredential('Basic xyz')).toEqual({ kind: 'missing' });
    expect(readBearerCredential('Bearerabc')).toEqual({ kind: 'missing' });
  });

  it.each(['Bearer', 'Bearer ', 'Bearer a b', 'Bearer a=b', 'Bearer "abc"', 'Bearer ab\u00e9'])(
    'answers malformed for %j',
    (header) => {
      expect(readBearerCredential(header)).toEqual({ kind: 'malformed' });
    },
  );

  it('answers malformed for several Authorization headers', () => {
    expect(readBearerCredential(['Bearer abc', 'Bearer def'])).toEqual({ kind: 'malformed' });
  });

  it('reads a one-element header array as that header', () => {
    expect(readBearerCredential(['Bearer abc'])).toEqual({ kind: 'token', token: 'abc' });
    expect(readBearerCredential(['Basic abc'])).toEqual({ kind: 'missing' });
  });

  it('answers malformed for an over-long token', () => {
    expect(readBearerCredential(`Bearer ${'a'.repeat(MAX_API_KEY_LENGTH)}`).kind).toBe('token');
    expect(readBearerCredential(`Bearer ${'a'.repeat(MAX_API_KEY_LENGTH + 100)}`)).toEqual({ kind: 'malformed' });
    // The bound is on the token, however it is spelt: one character over it is malformed, also after extra spaces.
    expect(readBearerCredential(`Bearer ${'a'.repeat(MAX_API_KEY_LENGTH + 1)}`)).toEqual({ kind: 'malformed' });
    expect(readBearerCredential(`Bearer   ${'a'.repeat(MAX_API_KEY_LENGTH + 1)}`)).toEqual({ kind: 'malformed' });
    expect(readBearerCredential(`Bearer          ${'a'.repeat(MAX_API_KEY_LENGTH)}`)).toEqual({ kind: 'token', token: 'a'.repeat(MAX_API_KEY_LENGTH) });
  });
});

describe('bearerChallenge', () => {
  it('names only the realm when no key was presented', () => {
    expect(bearerChallenge('petstore', false)).toBe('Bearer realm="petstore"');
  });

  it('adds error="invalid_token" when a key was presented', () => {
    const challenge = bearerChallenge('petstore', true);
    expect(challenge).toMatch(/^Bearer realm="petstore", /);
    expect(challenge).toContain('error="invalid_token"');
  });

  it('escapes quotes and backslashes in the realm', () => {
    expect(bearerChallenge('pet "store" \\ v1', false)).toBe('Bearer realm="pet \\"store\\" \\\\ v1"');
  });
});
