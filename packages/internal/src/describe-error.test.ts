import { describe, expect, it } from 'vitest';
import { describeError } from './describe-error.js';

describe('describeError', () => {
  const refused = (port: number) => Object.assign(new Error(`connect ECONNREFUSED 127.0.0.1:${port}`), { code: 'ECONNREFUSED' });

  it('describes any error in one line: its message, else its code, else its AggregateError messages', () => {
    expect(describeError(new AggregateError([refused(1), refused(2)], ''))).toBe('connect ECONNREFUSED 127.0.0.1:1; connect ECONNREFUSED 127.0.0.1:2');
    expect(describeError(Object.assign(new Error(''), { code: 'ETIMEDOUT' }))).toBe('ETIMEDOUT');
    expect(describeError(new Error('first line\n  second line'))).toBe('first line second line');
    expect(describeError(new TypeError(''))).toBe('TypeError');
    expect(describeError('a string')).toBe('a string');
  });

  it('adds what its causes say that it does not, three deep at most; with causes: false, none', () => {
    const denied = new Error('permission denied for table petstore_api_keys');
    const refusedStatement = new Error('PostgreSQL refused the statement', { cause: denied });
    expect(describeError(refusedStatement)).toBe('PostgreSQL refused the statement: permission denied for table petstore_api_keys');
    expect(describeError(new Error('failed: permission denied for table petstore_api_keys', { cause: denied }))).toBe('failed: permission denied for table petstore_api_keys');
    expect(describeError(refusedStatement, { causes: false })).toBe('PostgreSQL refused the statement');
    let deep = new Error('e4');
    for (const message of ['e3', 'e2', 'e1', 'e0']) deep = new Error(message, { cause: deep });
    expect(describeError(deep)).toBe('e0: e1: e2: e3');
  });
});
