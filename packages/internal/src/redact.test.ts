/** `redactUrl` and `redactSecrets`: every form of a password in a PostgreSQL or Redis URL is hidden. */
import { describe, expect, it } from 'vitest';
import { redactSecrets, redactUrl } from './redact.js';

describe('redactUrl', () => {
  it.each([
    ['postgres://app:s3cret@127.0.0.1:5432/petstore', 'postgres://app:***@127.0.0.1:5432/petstore'],
    ['redis://:s3cret@127.0.0.1:6379', 'redis://:***@127.0.0.1:6379'],
    // The last @ ends the userinfo: a password holding an unescaped @, / or # is hidden whole.
    ['redis://:p@ss@127.0.0.1:6379', 'redis://:***@127.0.0.1:6379'],
    ['postgres://app:p@ss/w#rd@db.internal/petstore', 'postgres://app:***@db.internal/petstore'],
    ['postgres://app:p%40ss@db.internal/petstore', 'postgres://app:***@db.internal/petstore'],
    // Query parameters pg and ioredis read as secrets.
    ['postgres://app@127.0.0.1/petstore?password=s3cret&sslmode=require', 'postgres://app@127.0.0.1/petstore?password=***&sslmode=require'],
    ['postgres://127.0.0.1/petstore?sslpassword=s3cret&sslcert=/etc/cert.pem', 'postgres://127.0.0.1/petstore?sslpassword=***&sslcert=/etc/cert.pem'],
    ['redis://127.0.0.1:6379?password=s3cret', 'redis://127.0.0.1:6379?password=***'],
    ['redis://127.0.0.1:6379/0?db=1&sentinelPassword=s3cret&PWD=x', 'redis://127.0.0.1:6379/0?db=1&sentinelPassword=***&PWD=***'],
    // Nothing secret: unchanged.
    ['postgres://app@127.0.0.1:5432/petstore', 'postgres://app@127.0.0.1:5432/petstore'],
    ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379'],
    // No parser accepts these; masked all the same.
    ['postgres://app:pa ss[@host:5432/db', 'postgres://app:***@host:5432/db'],
    ['not a url ?password=s3cret', 'not a url ?password=***'],
  ])('%s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });
});

describe('redactSecrets', () => {
  it('redacts a URL quoted whole, and each secret quoted alone, decoded or not', () => {
    const url = 'postgres://app:p%40ss-word@db.internal/petstore?sslpassword=k3y-secret';
    const text = `failed at ${url}: bad "p@ss-word" (p%40ss-word), key k3y-secret`;
    expect(redactSecrets(text, [url, undefined])).toBe('failed at postgres://app:***@db.internal/petstore?sslpassword=***: bad "***" (***), key ***');
  });
});
