/**
 * The format of managed API keys: `<prefix><random><checksum>`, e.g. `pet_` + 32 + 6 characters.
 *
 * - `random`: 32 characters of base62 (`0-9A-Za-z`) drawn uniformly from the operating system's CSPRNG:
 *   32 × log2(62) ≈ 190 bits.
 * - `checksum`: the CRC32 of the random part, in base62, exactly 6 characters (most significant first,
 *   zero-padded), as GitHub's tokens carry one. A mistyped, truncated or made-up key fails it, so it is refused
 *   without a store lookup; the checksum is no secret and adds no strength.
 *
 * Key ids (`key_` + 22 base62 characters, ≈131 bits) are random too, never derived from the key.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/keys.md#the-key
 */
import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

/** The base62 alphabet, in the order of its digits' values: `0-9`, `A-Z`, `a-z`. */
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** The prefix of managed keys unless `managedApiKeys({ prefix })` says otherwise. */
export const DEFAULT_MANAGED_KEY_PREFIX = 'pet_';
/** Characters of a managed key's random part (base62; ≈190 bits). */
export const MANAGED_KEY_RANDOM_LENGTH = 32;
/** Characters of a managed key's checksum (the random part's CRC32 in base62). */
export const MANAGED_KEY_CHECKSUM_LENGTH = 6;
/** Characters after the prefix: random part and checksum. */
const BODY_LENGTH = MANAGED_KEY_RANDOM_LENGTH + MANAGED_KEY_CHECKSUM_LENGTH;
/** The prefix of every key id. */
const KEY_ID_PREFIX = 'key_';
/** Random characters of a key id (base62; ≈131 bits). */
const KEY_ID_RANDOM_LENGTH = 22;

/** A valid prefix: a lowercase letter, then up to 15 lowercase letters or digits, then `_`. */
const PREFIX = /^[a-z][a-z0-9]{0,15}_$/;

/**
 * Throws unless `prefix` is a valid managed-key prefix: 1–16 characters `[a-z][a-z0-9]*` followed by `_`
 * (e.g. `pet_`, `acme2_`).
 * @param option how the caller names the option in the message, e.g. `managedApiKeys: prefix`.
 * @throws TypeError naming `option` and the rule.
 */
export function assertManagedKeyPrefix(prefix: unknown, option: string): asserts prefix is string {
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
    const got = typeof prefix === 'string' ? JSON.stringify(prefix.slice(0, 40)) : typeof prefix;
    throw new TypeError(`${option} must be 1–16 characters [a-z][a-z0-9]* followed by "_" (e.g. "pet_"); got ${got}`);
  }
}

/**
 * The regular expression a whole managed key with this prefix matches: `^pet_[0-9A-Za-z]{38}$` for the
 * default prefix. For a secret scanner looking inside text, drop the anchors and match on word boundaries:
 * `\bpet_[0-9A-Za-z]{38}\b`. A match still needs its checksum to be a key ({@link isWellFormedManagedKey}).
 * @throws TypeError for an invalid prefix (see {@link assertManagedKeyPrefix}).
 */
export function managedKeyPattern(prefix: string = DEFAULT_MANAGED_KEY_PREFIX): RegExp {
  assertManagedKeyPrefix(prefix, 'managedKeyPattern: prefix');
  return new RegExp(`^${prefix}[0-9A-Za-z]{${BODY_LENGTH}}$`);
}

/** The value of a base62 digit's character code, or -1 for any other character. */
function base62Value(code: number): number {
  if (code >= 48 && code <= 57) return code - 48; // 0-9
  if (code >= 65 && code <= 90) return code - 55; // A-Z → 10–35
  if (code >= 97 && code <= 122) return code - 61; // a-z → 36–61
  return -1;
}

/** `value` (0 ≤ value < 62^width) in base62, `width` characters, most significant first, zero-padded. */
function base62Fixed(value: number, width: number): string {
  let text = '';
  for (let i = 0; i < width; i++) {
    text = BASE62[value % 62] + text;
    value = Math.floor(value / 62);
  }
  return text;
}

/**
 * `length` characters of base62, each drawn uniformly from the CSPRNG: bytes ≥ 248 (= 4 × 62) are dropped, so
 * `byte % 62` has no bias.
 */
function randomBase62(length: number): string {
  let text = '';
  while (text.length < length) {
    for (const byte of randomBytes(length + 8)) {
      if (byte < 248) text += BASE62[byte % 62];
      if (text.length === length) break;
    }
  }
  return text;
}

/** A new managed key with this (already validated) prefix. The caller hashes it and hands it out once. */
export function generateManagedKey(prefix: string): string {
  const random = randomBase62(MANAGED_KEY_RANDOM_LENGTH);
  return prefix + random + base62Fixed(crc32(random), MANAGED_KEY_CHECKSUM_LENGTH);
}

/** A new key id: `key_` and 22 random base62 characters. Public, not a secret, not derived from any key. */
export function generateKeyId(): string {
  return KEY_ID_PREFIX + randomBase62(KEY_ID_RANDOM_LENGTH);
}

/**
 * True when `key` has the managed-key format with this prefix and a matching checksum. Checks, cheapest first,
 * and stops at the first failure: the length (exactly the prefix's plus 38, before anything else is read),
 * the prefix, the characters, then the checksum. Pure and synchronous; it allocates only the random part for
 * the checksum, once everything else has passed.
 *
 * A true answer says the key could have been issued, not that it was: the store decides that.
 */
export function isWellFormedManagedKey(key: string, prefix: string = DEFAULT_MANAGED_KEY_PREFIX): boolean {
  if (typeof key !== 'string' || key.length !== prefix.length + BODY_LENGTH) return false;
  if (!key.startsWith(prefix)) return false;
  const randomEnd = prefix.length + MANAGED_KEY_RANDOM_LENGTH;
  for (let i = prefix.length; i < randomEnd; i++) {
    if (base62Value(key.charCodeAt(i)) < 0) return false;
  }
  let checksum = 0;
  for (let i = randomEnd; i < key.length; i++) {
    const digit = base62Value(key.charCodeAt(i));
    if (digit < 0) return false;
    checksum = checksum * 62 + digit;
  }
  return checksum === crc32(key.slice(prefix.length, randomEnd));
}
