import { describe, expect, it } from 'vitest';
import { parseNewCategory, type NewCategoryParseResult } from './schemas.js';
import { pollutionProbe } from '../test-support/pollution-probe.js';

function failureMessage(result: NewCategoryParseResult): string {
  if (result.success) throw new Error(`expected a failure, got ${JSON.stringify(result.value)}`);
  return result.message;
}

describe('parseNewCategory', () => {
  it('accepts a name without description', () => {
    expect(parseNewCategory({ name: 'Dogs' })).toEqual({ success: true, value: { name: 'Dogs' } });
  });

  it('accepts a name with description, keeping the description as sent', () => {
    expect(parseNewCategory({ name: 'Dogs', description: '  Loyal friends ' })).toEqual({
      success: true,
      value: { name: 'Dogs', description: '  Loyal friends ' },
    });
  });

  it('trims the name', () => {
    expect(parseNewCategory({ name: ' \t Cats \n' })).toEqual({ success: true, value: { name: 'Cats' } });
  });

  it('rejects a missing name', () => {
    expect(failureMessage(parseNewCategory({}))).toContain('name: is required');
    expect(failureMessage(parseNewCategory({ description: 'no name' }))).toContain('name: is required');
  });

  it('rejects a name that is not a string', () => {
    expect(failureMessage(parseNewCategory({ name: 42 }))).toContain('name: must be a string');
  });

  it('rejects an empty or whitespace-only name', () => {
    expect(failureMessage(parseNewCategory({ name: '' }))).toContain('name: must not be empty');
    expect(failureMessage(parseNewCategory({ name: ' \t\n ' }))).toContain('name: must not be empty');
  });

  it('accepts a name of exactly 100 characters and rejects 101', () => {
    expect(parseNewCategory({ name: 'a'.repeat(100) }).success).toBe(true);
    expect(failureMessage(parseNewCategory({ name: 'a'.repeat(101) }))).toContain(
      'name: must be at most 100 characters',
    );
  });

  it('counts the 100-character name limit after trimming', () => {
    expect(parseNewCategory({ name: `  ${'a'.repeat(100)}  ` }).success).toBe(true);
  });

  it('counts an emoji as one character', () => {
    const hundredEmoji = '🐕'.repeat(100); // 200 UTF-16 code units
    expect(parseNewCategory({ name: hundredEmoji })).toEqual({ success: true, value: { name: hundredEmoji } });
    const family = '👨‍👩‍👧'; // one grapheme of 5 code points
    expect(parseNewCategory({ name: family.repeat(80) }).success).toBe(true); // 80 characters, 400 code points
    expect(failureMessage(parseNewCategory({ name: '🐕'.repeat(101) }))).toContain('at most 100 characters');
  });

  it.each([
    ['NUL', 'a\u0000b'],
    ['BEL', 'a\u0007b'],
    ['tab inside', 'a\tb'],
    ['newline inside', 'a\nb'],
    ['DEL', 'a\u007fb'],
    ['C1 control', 'a\u0085b'],
  ])('rejects a name holding a control character (%s)', (_label, name) => {
    expect(failureMessage(parseNewCategory({ name }))).toContain('name: must not contain control characters');
  });

  it('accepts a description of 1000 characters and rejects 1001', () => {
    expect(parseNewCategory({ name: 'x', description: 'd'.repeat(1000) }).success).toBe(true);
    expect(failureMessage(parseNewCategory({ name: 'x', description: 'd'.repeat(1001) }))).toContain(
      'description: must be at most 1000 characters',
    );
  });

  it('rejects a null description', () => {
    expect(failureMessage(parseNewCategory({ name: 'x', description: null }))).toContain(
      'description: must be a string',
    );
  });

  it('rejects an unknown field and names it', () => {
    const message = failureMessage(parseNewCategory({ name: 'x', colour: 'brown' }));
    expect(message).toContain('colour: is not a field of NewCategory');
  });

  it('rejects an id in the body (the service assigns it)', () => {
    expect(failureMessage(parseNewCategory({ id: 7, name: 'x' }))).toContain('id: is not a field of NewCategory');
  });

  describe('prototype keys from JSON.parse (__proto__, constructor.prototype), also nested', () => {
    const probe = pollutionProbe('petstoreSchemasTestPollutionMarker');

    it.each(probe.payloads)('rejects a body with $field, naming it, and pollutes nothing', ({ field, text }) => {
      const body: unknown = JSON.parse(text);
      expect(failureMessage(parseNewCategory(body))).toContain(`${field}: is not a field of NewCategory`);
      expect(probe.traces(body)).toEqual([]);
      // A value validated afterwards inherits no marker either.
      const accepted = parseNewCategory({ name: 'Dogs' });
      expect(accepted).toEqual({ success: true, value: { name: 'Dogs' } });
      expect(probe.traces(accepted.success && accepted.value)).toEqual([]);
    });
  });

  it.each(['constructor', 'toString', 'hasOwnProperty'])('rejects the inherited name %s as a field', (field) => {
    const body: unknown = JSON.parse(`{"name":"x","${field}":1}`);
    expect(failureMessage(parseNewCategory(body))).toContain(`${field}: is not a field of NewCategory`);
  });

  it('names every problem at once', () => {
    const message = failureMessage(parseNewCategory({ colour: 'brown', description: 3 }));
    expect(message).toContain('name: is required');
    expect(message).toContain('colour: is not a field');
    expect(message).toContain('description: must be a string');
  });

  it.each([
    ['an array', [{ name: 'x' }]],
    ['a string', 'Dogs'],
    ['a number', 3],
    ['null', null],
    ['a boolean', true],
  ])('rejects %s with a message saying a JSON object is needed', (_label, body) => {
    expect(failureMessage(parseNewCategory(body))).toBe('The request body must be a JSON object (a NewCategory).');
  });

  it('never throws, whatever it gets', () => {
    for (const body of [undefined, Symbol('x'), () => 1, new Map(), Object.create(null)]) {
      expect(() => parseNewCategory(body)).not.toThrow();
      expect(parseNewCategory(body).success).toBe(false);
    }
  });
});
