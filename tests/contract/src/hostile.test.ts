import { describe } from 'vitest';
import { defineHostileCases } from './hostile.js';
import { SERVER_IMPLS } from './servers.js';

// As in contract.test.ts: the twin with express.json() in front of the API runs the cases that parser can see.
describe.each(SERVER_IMPLS)('hostile input over $name', (impl) => {
  defineHostileCases(impl, { bodyCasesOnly: impl.capabilities.hostJsonParser === 'express' });
});
