/** The cache key of "no ban policy". */
const NO_BAN = Object.freeze({});

/**
 * `build` remembered per windows array and ban policy, for the frozen ones only (the engine hands out one frozen
 * pair per plan), so a store builds a plan's arguments once and a request builds nothing; an unfrozen pair could
 * change after it was built, so it is built each time.
 */
export function cachePerPolicy<W extends object, B extends object, P>(
  build: (windows: readonly W[], ban: B | undefined) => P,
): (windows: readonly W[], ban: B | undefined) => P {
  const built = new WeakMap<readonly W[], WeakMap<object, P>>();
  return (windows, ban) => {
    const banKey: object = ban ?? NO_BAN;
    const cached = built.get(windows)?.get(banKey);
    if (cached !== undefined) return cached;
    const policy = build(windows, ban);
    if (Object.isFrozen(windows) && windows.every((window) => Object.isFrozen(window)) && Object.isFrozen(banKey)) {
      let byBan = built.get(windows);
      if (byBan === undefined) built.set(windows, (byBan = new WeakMap()));
      byBan.set(banKey, policy);
    }
    return policy;
  };
}
