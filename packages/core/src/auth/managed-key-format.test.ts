import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MANAGED_KEY_PREFIX,
  assertManagedKeyPrefix,
  generateKeyId,
  generateManagedKey,
  isWellFormedManagedKey,
  managedKeyPattern,
} from './managed-key-format.js';
import { seededRandom } from '../testing/seeded-random.js';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// Keys whose checksums were computed outside this library (Python: binascii.crc32 of the random part, written
// in base62 0-9A-Za-z, 6 digits, most significant first): the format is what the docs say, not only what this
// code does.
const KNOWN_KEYS = [
  'pet_abcdefghijklmnopqrstuvwxyzABCDEF1mVgZW', // CRC32 1632948778
  'pet_000000000000000000000000000000002wjyrI', // CRC32 2700251856
  'pet_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz4W8LJS', // CRC32 4139362634
];


describe('managed key format', () => {
  it('accepts keys whose checksum was computed independently, and documents the default pattern', () => {
    for (const key of KNOWN_KEYS) {
      expect(isWellFormedManagedKey(key), key).toBe(true);
      expect(isWellFormedManagedKey(key, 'pet_'), key).toBe(true);
      expect(managedKeyPattern().test(key), key).toBe(true);
    }
    expect(DEFAULT_MANAGED_KEY_PREFIX).toBe('pet_');
    expect(managedKeyPattern().source).toBe('^pet_[0-9A-Za-z]{38}$');
    expect(managedKeyPattern('acme_').source).toBe('^acme_[0-9A-Za-z]{38}$');
  });

  it('makes keys of the documented shape, each different, that pass their own check', () => {
    const keys = new Set<string>();
    for (let i = 0; i < 1_000; i++) {
      const key = generateManagedKey('pet_');
      expect(key).toMatch(/^pet_[0-9A-Za-z]{38}$/);
      expect(isWellFormedManagedKey(key, 'pet_'), key).toBe(true);
      keys.add(key);
    }
    expect(keys.size).toBe(1_000);
    const other = generateManagedKey('acme2_');
    expect(other).toMatch(managedKeyPattern('acme2_'));
    expect(isWellFormedManagedKey(other, 'acme2_')).toBe(true);
    expect(isWellFormedManagedKey(other, 'pet_')).toBe(false);
  });

  it('draws the random characters uniformly: no base62 digit is favoured (no modulo bias)', () => {
    const counts = new Map<string, number>(Array.from(BASE62, (character) => [character, 0]));
    const keys = 3_000;
    for (let i = 0; i < keys; i++) {
      for (const character of generateManagedKey('pet_').slice(4, 36)) counts.set(character, (counts.get(character) as number) + 1);
    }
    expect([...counts.keys()].join('')).toBe(BASE62); // nothing outside the alphabet was counted
    const expected = (keys * 32) / 62;
    for (const [character, count] of counts) {
      // ±15 % of about 1,550 per character is more than 9 standard deviations: never fails by chance.
      expect(Math.abs(count - expected) / expected, `frequency of ${character}`).toBeLessThan(0.15);
    }
    // A bare `byte % 62` draws 0–7 with 5/256 and the rest with 4/256: a quarter more often. Averaged over the
    // eight characters, a 6 % difference is far outside chance (about 5 standard deviations) yet far below 25 %.
    const mean = (characters: string) => [...characters].reduce((sum, c) => sum + (counts.get(c) as number), 0) / characters.length;
    expect(mean(BASE62.slice(0, 8)) / mean(BASE62.slice(8))).toBeLessThan(1.06);
  });

  it('makes random key ids of the documented shape, never derived from a key', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 1_000; i++) {
      const keyId = generateKeyId();
      expect(keyId).toMatch(/^key_[0-9A-Za-z]{22}$/);
      ids.add(keyId);
    }
    expect(ids.size).toBe(1_000);
  });

  it('refuses every single mistyped character, in the random part and in the checksum', () => {
    // Every mistyped key accepted is listed (one assertion for 23,180 keys: an expect() each cost more than the check).
    const accepted: string[] = [];
    let tried = 0;
    for (let n = 0; n < 10; n++) {
      const key = generateManagedKey('pet_');
      for (let position = 4; position < key.length; position++) {
        for (const replacement of BASE62) {
          if (replacement === key[position]) continue;
          const mistyped = key.slice(0, position) + replacement + key.slice(position + 1);
          tried += 1;
          if (isWellFormedManagedKey(mistyped, 'pet_')) accepted.push(`${mistyped} (${position}: ${replacement})`);
        }
      }
    }
    expect(tried).toBe(10 * 38 * 61);
    expect(accepted).toEqual([]);
  });

  it('refuses two neighbouring characters swapped', () => {
    const accepted: string[] = [];
    for (let n = 0; n < 50; n++) {
      const key = generateManagedKey('pet_');
      for (let position = 4; position < key.length - 1; position++) {
        if (key[position] === key[position + 1]) continue;
        const swapped = key.slice(0, position) + key[position + 1] + key[position] + key.slice(position + 2);
        if (isWellFormedManagedKey(swapped, 'pet_')) accepted.push(`${swapped} (swap at ${position})`);
      }
    }
    expect(accepted).toEqual([]);
  });

  it('refuses a truncated or extended key, a key with another prefix, and characters outside base62', () => {
    const key = KNOWN_KEYS[0] as string;
    for (let length = 0; length < key.length; length++) expect(isWellFormedManagedKey(key.slice(0, length), 'pet_'), `length ${length}`).toBe(false);
    expect(isWellFormedManagedKey(`${key}0`, 'pet_')).toBe(false);
    expect(isWellFormedManagedKey(`x${key}`, 'pet_')).toBe(false);
    expect(isWellFormedManagedKey(`cat_${key.slice(4)}`, 'pet_')).toBe(false); // same length, other prefix
    expect(isWellFormedManagedKey(`Pet_${key.slice(4)}`, 'pet_')).toBe(false);
    expect(isWellFormedManagedKey(key, 'cat_')).toBe(false);
    // Characters a bearer token may hold, but not base62.
    for (const outside of ['-', '.', '_', '~', '+', '/', '=', 'é', ' ']) {
      expect(isWellFormedManagedKey(`${key.slice(0, 10)}${outside}${key.slice(11)}`, 'pet_'), outside).toBe(false);
      expect(isWellFormedManagedKey(`${key.slice(0, 40)}${outside}${key.slice(41)}`, 'pet_'), outside).toBe(false);
    }
  });

  it('checks the length before anything else: a right checksum in a body of another length is refused', () => {
    // 33 random characters followed by the true checksum of those 33 (computed independently, Python
    // binascii.crc32 of "abcdefghijklmnopqrstuvwxyzABCDEFG" = 3781207738 → base62 "47tYra"): everything but the
    // length is right.
    expect(isWellFormedManagedKey('pet_abcdefghijklmnopqrstuvwxyzABCDEFG47tYra', 'pet_')).toBe(false);
    // A very long string is refused as cheaply as a short one (no characters read, nothing allocated).
    expect(isWellFormedManagedKey(`pet_${'a'.repeat(1_000_000)}`, 'pet_')).toBe(false);
  });

  it('refuses 100,000 random tokens of the right shape (prefix, length and alphabet): only the checksum stops them', () => {
    const { random } = seededRandom(22);
    let accepted = 0;
    for (let n = 0; n < 100_000; n++) {
      let body = '';
      for (let i = 0; i < 38; i++) body += BASE62[Math.floor(random() * 62)];
      if (isWellFormedManagedKey(`pet_${body}`, 'pet_')) accepted++;
    }
    // A random body passes with probability 2^-32: none of these seeded ones does.
    expect(accepted).toBe(0);
  });

  it('accepts prefixes of 1–16 characters [a-z][a-z0-9]* followed by "_", and names the option otherwise', () => {
    for (const prefix of ['pet_', 'a_', 'acme2_', 'abcdefghijklmnop_']) {
      expect(() => assertManagedKeyPrefix(prefix, 'managedApiKeys: prefix'), prefix).not.toThrow();
      expect(isWellFormedManagedKey(generateManagedKey(prefix), prefix), prefix).toBe(true);
    }
    for (const prefix of ['', '_', 'pet', 'Pet_', '1pet_', 'pe-t_', 'pet__', 'pet_x', 'abcdefghijklmnopq_', ' pet_', 42, undefined]) {
      expect(() => assertManagedKeyPrefix(prefix, 'managedApiKeys: prefix'), String(prefix)).toThrow(
        new TypeError(
          `managedApiKeys: prefix must be 1–16 characters [a-z][a-z0-9]* followed by "_" (e.g. "pet_"); got ${typeof prefix === 'string' ? JSON.stringify(prefix) : typeof prefix}`,
        ),
      );
    }
    for (const prefix of ['', 'pet', 'Pet_', 'pet__', 'abcdefghijklmnopq_']) {
      expect(() => managedKeyPattern(prefix), prefix).toThrow(/^managedKeyPattern: prefix must be/);
    }
  });
});
