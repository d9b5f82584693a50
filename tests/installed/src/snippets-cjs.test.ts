/**
 * The READMEs' code as CommonJS, against the installed packages: TypeScript compiled with `moduleResolution`
 * `node16` (emitted) and `node10` (checked), strict; then the embedding code run.
 */
import { describe, expect, inject, it } from 'vitest';
import { ENTERPRISE_KEY, FREE_KEY, compileProgram, describeDiagnostics, programs, runProgram } from './run-snippets.js';
import { readSnippets } from './snippets.js';

const { app, redis } = inject('installed');
const snippets = await readSnippets();

describe('the READMEs’ code', () => {
  it('compiles as CommonJS (moduleResolution node16, strict)', () => {
    expect(describeDiagnostics(compileProgram(app, 'cjs-node16').diagnostics, snippets)).toEqual([]);
  });
  it('compiles as CommonJS (moduleResolution node10, strict)', () => {
    expect(describeDiagnostics(compileProgram(app, 'cjs-node10').diagnostics, snippets)).toEqual([]);
  });
});

describe.concurrent('the READMEs’ code, run as CommonJS', () => {
  for (const program of programs(snippets).filter((candidate) => candidate.form === 'CommonJS')) {
    it(`${program.label}: ${program.server ? 'answers an authenticated GET /v1/categories' : 'runs and exits 0'}`, async ({ skip }) => {
      if (program.needsRedis && 'skipReason' in redis) skip(redis.skipReason);
      const failure = await runProgram(app, program, {
        PETSTORE_API_KEY: FREE_KEY,
        PETSTORE_ENTERPRISE_KEY: ENTERPRISE_KEY,
        PETSTORE_URL: '',
        REDIS_URL: 'url' in redis ? redis.url : '',
      });
      expect(failure).toBeUndefined();
    });
  }
});
