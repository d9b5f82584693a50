/**
 * A prototype-pollution probe: request bodies that a vulnerable deep merge would turn into a property on
 * `Object.prototype`, and the check that tells whether such a property appeared. Test support for this
 * package's tests and the HTTP contract suite (tests/contract); not exported by any package.
 */

/** A hostile body, and the unknown top-level field the API must name when it refuses it. */
export interface PollutionPayload {
  field: string;
  text: string;
}

/** The payloads and checks for one marker property name, which each test picks for itself. */
export interface PollutionProbe {
  marker: string;
  payloads: readonly PollutionPayload[];
  /**
   * Where the marker shows up: `Object.prototype` when it has the marker as its own property, `a new object`
   * when a fresh `{}` inherits it, and `value <i>` for each given value that has it (own or inherited).
   * Empty when nothing was polluted.
   */
  traces(...values: readonly unknown[]): string[];
  /** Deletes the marker from `Object.prototype`. */
  clean(): void;
}

/** Builds the probe for `marker` (a property name unique to the test). */
export function pollutionProbe(marker: string): PollutionProbe {
  const inner = `{${JSON.stringify(marker)}:1}`;
  return {
    marker,
    payloads: [
      { field: '__proto__', text: `{"name":"x","__proto__":${inner}}` },
      { field: 'constructor', text: `{"name":"x","constructor":{"prototype":${inner}}}` },
      { field: 'settings', text: `{"name":"x","settings":{"__proto__":${inner}}}` },
      { field: 'meta', text: `{"name":"x","meta":{"tags":{"constructor":{"prototype":${inner}}}}}` },
    ],
    traces(...values) {
      const found: string[] = [];
      if (Object.hasOwn(Object.prototype, marker)) found.push('Object.prototype');
      if (marker in {}) found.push('a new object');
      values.forEach((value, index) => {
        if (typeof value === 'object' && value !== null && marker in value) found.push(`value ${index}`);
      });
      return found;
    },
    clean() {
      delete (Object.prototype as Record<string, unknown>)[marker];
    },
  };
}

/**
 * A deliberately vulnerable deep merge, as old utility libraries had: it follows every key, `__proto__` and
 * `constructor` included, into whatever the target already holds there. Only for showing that the probe's
 * payloads and checks catch real pollution.
 */
export function vulnerableMerge(target: Record<string, unknown>, source: unknown): Record<string, unknown> {
  for (const key of Object.keys(source as object)) {
    const value = (source as Record<string, unknown>)[key];
    if (typeof value === 'object' && value !== null) {
      const existing = target[key];
      if (existing === null || (typeof existing !== 'object' && typeof existing !== 'function')) target[key] = {};
      vulnerableMerge(target[key] as Record<string, unknown>, value);
    } else {
      target[key] = value;
    }
  }
  return target;
}
