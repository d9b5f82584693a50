import { describe, expect, it } from 'vitest';
import { ERROR_CODES, PetstoreError, errorBody, isPetstoreError, type ErrorCode } from './errors.js';

// Written out, not derived from ERROR_STATUS, so a changed status fails here.
const EXPECTED_STATUS: Record<ErrorCode, number> = {
  validation_failed: 400,
  invalid_json: 400,
  invalid_content_type: 400,
  invalid_idempotency_key: 400,
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  idempotency_key_in_flight: 409,
  gone: 410,
  payload_too_large: 413,
  unsupported_encoding: 415,
  expectation_failed: 417,
  idempotency_key_reused: 422,
  header_fields_too_large: 431,
  rate_limited: 429,
  temporarily_banned: 429,
  internal_error: 500,
  not_implemented: 501,
  service_unavailable: 503,
  storage_full: 507,
};

describe('PetstoreError', () => {
  it('has exactly the expected codes', () => {
    expect([...ERROR_CODES].sort()).toEqual(Object.keys(EXPECTED_STATUS).sort());
  });

  it.each(Object.entries(EXPECTED_STATUS))('answers %s with status %i', (code, status) => {
    const error = new PetstoreError(code as ErrorCode, 'Something happened.');
    expect(error.status).toBe(status);
    expect(error.code).toBe(code);
    expect(error.name).toBe('PetstoreError');
    expect(error).toBeInstanceOf(Error);
    expect(error.toBody()).toEqual({ code, message: 'Something happened.', status });
  });

  it('gives a body of exactly code, message and status, without stack or cause', () => {
    const error = new PetstoreError('internal_error', 'The server failed.', { cause: new Error('db down') });
    const body = error.toBody();
    expect(Object.keys(body)).toEqual(['code', 'message', 'status']);
    expect(JSON.stringify(body)).toBe('{"code":"internal_error","message":"The server failed.","status":500}');
  });

  it('keeps the cause on the error itself', () => {
    const cause = new Error('db down');
    expect(new PetstoreError('internal_error', 'failed', { cause }).cause).toBe(cause);
  });
});

describe('errorBody', () => {
  it('takes the status from the code', () => {
    expect(errorBody('payload_too_large', 'Too big.')).toEqual({
      code: 'payload_too_large',
      message: 'Too big.',
      status: 413,
    });
    expect(Object.keys(errorBody('not_found', 'x'))).toEqual(['code', 'message', 'status']);
  });
});

describe('isPetstoreError', () => {
  it('is true for a PetstoreError', () => {
    expect(isPetstoreError(new PetstoreError('not_found', 'x'))).toBe(true);
  });

  it('is true for a look-alike from another copy of the library', () => {
    const fromOtherCopy = Object.assign(new Error('Store is full.'), { name: 'PetstoreError', code: 'storage_full' });
    expect(fromOtherCopy).not.toBeInstanceOf(PetstoreError);
    expect(isPetstoreError(fromOtherCopy)).toBe(true);
  });

  it('is false for an unknown code', () => {
    expect(isPetstoreError(Object.assign(new Error('x'), { name: 'PetstoreError', code: 'teapot' }))).toBe(false);
    expect(isPetstoreError(Object.assign(new Error('x'), { name: 'PetstoreError', code: 'toString' }))).toBe(false);
    expect(isPetstoreError(Object.assign(new Error('x'), { name: 'PetstoreError' }))).toBe(false);
  });

  it('is false for a plain Error, even with a known code', () => {
    expect(isPetstoreError(new Error('x'))).toBe(false);
    expect(isPetstoreError(Object.assign(new Error('x'), { code: 'not_found' }))).toBe(false);
  });

  it('is false for non-errors shaped like one', () => {
    expect(isPetstoreError({ name: 'PetstoreError', code: 'not_found', message: 'x' })).toBe(false);
    expect(isPetstoreError(undefined)).toBe(false);
    expect(isPetstoreError('PetstoreError')).toBe(false);
  });
});
