import { describe, expect, it } from 'vitest';
import { originFormTarget, pathBelowPrefix } from './prefix.js';

describe('originFormTarget', () => {
  it.each([
    ['/v1/categories', '/v1/categories'],
    ['/v1/categories?x=1', '/v1/categories?x=1'],
    ['http://127.0.0.1:3000/v1/categories', '/v1/categories'],
    ['HTTPS://api.example:443/v1/categories?x=1', '/v1/categories?x=1'],
    ['http://user@host/v1', '/v1'],
    ['http://host', '/'],
    ['http://host?x=1', '/?x=1'],
    ['*', '*'],
    ['v1/categories', 'v1/categories'],
  ])('takes %j as %j', (target, expected) => {
    expect(originFormTarget(target)).toBe(expected);
  });
});

describe('pathBelowPrefix', () => {
  it.each([
    ['/v1', '/v1', '/'],
    ['/v1/categories', '/v1', '/categories'],
    ['/v1?x=1', '/v1', '/?x=1'],
    ['/v1/', '/v1', '/'],
    ['/v1%2fcategories', '/v1', undefined],
    ['/v1%41', '/v1', undefined],
    ['/v1%c0%afcategories', '/v1', '%c0%afcategories'],
    ['/v1%zz/categories?x', '/v1', '%zz/categories?x'],
    ['/v1%', '/v1', '%'],
    ['/v10/categories', '/v1', undefined],
    ['/v1categories', '/v1', undefined],
    ['/v2/categories', '/v1', undefined],
    ['//v1/categories', '/v1', undefined],
    ['/', '/v1', undefined],
    ['/anything', '', '/anything'],
    ['/api/v1/categories', '/api/v1', '/categories'],
  ])('finds %j below %j as %j', (target, prefix, expected) => {
    expect(pathBelowPrefix(target, prefix)).toBe(expected);
  });
});
