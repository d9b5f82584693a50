import { describe } from 'vitest';
import { defineContractCases } from './contract.js';
import { SERVER_IMPLS } from './servers.js';

// An Express app with express.json() in front of the API differs from the same app without it only for requests
// with a body: those implementations run the cases that send one (see defineContractCases).
describe.each(SERVER_IMPLS)('petstore HTTP contract over $name', (impl) => {
  defineContractCases(impl, { bodyCasesOnly: impl.capabilities.hostJsonParser === 'express' });
});
