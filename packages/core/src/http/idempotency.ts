/**
 * The `Idempotency-Key` request header of createCategory (draft-ietf-httpapi-idempotency-key-header-06): an
 * Item structured field (RFC 9651) whose value is a String, e.g. `Idempotency-Key: "8e03978e-40d5-43e8"`.
 */
import { hash } from 'node:crypto';
import { parseItem } from 'structured-headers';
import { PetstoreError } from '../errors.js';
import type { NewCategory } from '../schemas.js';
import type { PetstoreHeaders } from './types.js';

/** The longest key accepted, in characters (after unquoting). */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
/** The header's longest raw value: the key's characters, each possibly escaped, within quotes, plus spaces. */
const MAX_RAW_LENGTH = 2 * MAX_IDEMPOTENCY_KEY_LENGTH + 16;

/** Default `idempotency.retentionMs`: 24 hours. */
export const DEFAULT_IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;

const MESSAGE = `Idempotency-Key must be one structured-field string of 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters, e.g. Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324".`;

/**
 * The request's idempotency key, `undefined` when it sends none.
 * @throws PetstoreError `invalid_idempotency_key` (400) when the header is sent more than once, is longer than
 *   the bound (checked before parsing), is not an sf-string (a token, a number, parameters, garbage), or its
 *   string is empty or over 255 characters.
 */
export function readIdempotencyKey(headers: PetstoreHeaders): string | undefined {
  const value = headers['idempotency-key'];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length > MAX_RAW_LENGTH) throw new PetstoreError('invalid_idempotency_key', MESSAGE);
  let item: ReturnType<typeof parseItem>;
  try {
    item = parseItem(value);
  } catch {
    throw new PetstoreError('invalid_idempotency_key', MESSAGE);
  }
  const [key, parameters] = item;
  if (typeof key !== 'string' || parameters.size > 0 || key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw new PetstoreError('invalid_idempotency_key', MESSAGE);
  }
  return key;
}

/**
 * The store's key for `idempotencyKey` sent with the API key `keyId`: SHA-256 over both (hex), so a key is
 * scoped to its caller, has a fixed length, and is never stored or logged as sent.
 */
export function scopedIdempotencyKey(keyId: string, idempotencyKey: string): string {
  return hash('sha256', JSON.stringify([keyId, idempotencyKey]), 'hex');
}

/**
 * The request's fingerprint: SHA-256 (hex) of every field of the validated NewCategory, sorted by name, so key
 * order and whitespace do not matter, a field left out differs from one sent empty, and a field the schema gains
 * is covered without a change here.
 */
export function newCategoryFingerprint(newCategory: NewCategory): string {
  const fields = Object.entries(newCategory).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return hash('sha256', JSON.stringify(fields), 'hex');
}
