import { describe } from 'vitest';
import { defineHostileCases } from './hostile.js';
import { SERVER_IMPLS } from './servers.js';

describe.each(SERVER_IMPLS)('hostile input over $name', (impl) => {
  defineHostileCases(impl);
});
