import { describe, expect, it } from 'vitest';
import { pollutionProbe, vulnerableMerge } from './pollution-probe.js';

// The tests that use the probe (here, and the HTTP contract suite) assert it finds nothing; this shows it
// would find something: each payload, fed to a vulnerable deep merge, is caught.
describe('pollutionProbe', () => {
  const probe = pollutionProbe('petstoreProbeSelfTestMarker');

  it.each(probe.payloads)('catches what a vulnerable deep merge of the $field payload does', ({ text }) => {
    expect(probe.traces()).toEqual([]);
    try {
      vulnerableMerge({}, JSON.parse(text));
      expect(probe.traces({ plain: true }), text).toEqual(['Object.prototype', 'a new object', 'value 0']);
    } finally {
      probe.clean();
    }
    expect(probe.traces()).toEqual([]);
  });
});
