import { describe } from 'vitest';
import { defineContractCases } from './contract.js';
import { SERVER_IMPLS } from './servers.js';

describe.each(SERVER_IMPLS)('petstore HTTP contract over $name', (impl) => {
  defineContractCases(impl);
});
