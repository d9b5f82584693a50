/** The account plans. */
export const PLAN_NAMES = ['free', 'pro', 'business', 'enterprise'] as const;
/** One of the account plans. */
export type PlanName = (typeof PLAN_NAMES)[number];

/**
 * Requests allowed per minute and per day (the plan table). Both are whole numbers ≥ 0.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#plans
 */
export interface PlanLimits {
  requestsPerMinute: number;
  requestsPerDay: number;
}

/**
 * Who is calling: resolved from a valid API key by an {@link ApiKeyStore}.
 *
 * - `keyId`: a stable, non-secret identifier of the API key; rate-limit counters and bans are kept per key
 *   (a ban applies to the API key). Never the key itself.
 * - `accountId`: the account the key belongs to.
 * - `plan`: the account's plan; selects the limits.
 * - `limits`: custom limits; required in practice for `enterprise` ("custom" in the plan table), and also accepted
 *   for other plans as an override.
 */
export interface Principal {
  keyId: string;
  accountId: string;
  plan: PlanName;
  limits?: PlanLimits;
}

/** True when `value` names an account plan. */
export function isPlanName(value: string): value is PlanName {
  return (PLAN_NAMES as readonly string[]).includes(value);
}
