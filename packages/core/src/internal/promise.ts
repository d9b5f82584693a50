/**
 * Something that may be a promise. Stores and key stores may answer directly or with a promise (any
 * thenable); the hot path tells them apart with `typeof (value as Thenable).then === 'function'` written
 * out at each call site rather than in one shared helper: V8 keeps property-access feedback per function,
 * so one helper seeing every kind of answer would make that lookup megamorphic (slow) on every request.
 * Internal.
 */
export interface Thenable {
  then?: unknown;
}
