/**
 * Helpers shared by the petstore packages. Private: each package bundles what it uses into its own build, so
 * nothing here is part of any public API.
 */
export { assertWhole } from './assert-whole.js';
export { hex } from './hex.js';
export { cachePerPolicy } from './policy-cache.js';
export { storedKeyText } from './stored-key-text.js';
export { createTurnBatches, type TurnBatchesOptions } from './turn-batches.js';
export { describeError } from './describe-error.js';
export { inTransaction, type TransactionClient } from './in-transaction.js';
export { redactSecrets, redactUrl } from './redact.js';
