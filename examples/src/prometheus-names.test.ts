/**
 * The Prometheus names of OpenTelemetry metrics, against the examples of OpenTelemetry's Prometheus compatibility
 * specification and of the translator the Collector and Prometheus use (prometheus/otlptranslator).
 */
import { describe, expect, it } from 'vitest';
import { prometheusMetricName, prometheusUnit } from './prometheus-names.js';

describe('prometheusMetricName', () => {
  it.each([
    // The petstore's own metrics.
    ['http.server.request.duration', 's', 'other', 'http_server_request_duration_seconds'],
    ['petstore.store.operation.duration', 's', 'other', 'petstore_store_operation_duration_seconds'],
    ['petstore.rate_limit.decisions', '{decision}', 'counter', 'petstore_rate_limit_decisions_total'],
    ['petstore.auth.failures', '{failure}', 'counter', 'petstore_auth_failures_total'],
    ['petstore.api_key.watch.connected', '{connection}', 'gauge', 'petstore_api_key_watch_connected'],
    ['system.cpu.utilization', '1', 'gauge', 'system_cpu_utilization_ratio'],
    // The specification's and the translator's examples.
    ['foo', 'ms', 'counter', 'foo_milliseconds_total'],
    ['memory.usage', 'By', 'gauge', 'memory_usage_bytes'],
    ['requests.count', '1', 'counter', 'requests_count_total'],
    ['otelcol_process_uptime', 's', 'counter', 'otelcol_process_uptime_seconds_total'],
    ['network.io', 'By/s', 'gauge', 'network_io_bytes_per_second'],
    ['queue.size', '{packet}', 'other', 'queue_size'],
  ] as const)('%s (%s, %s) → %s', (name, unit, kind, expected) => {
    expect(prometheusMetricName(name, unit, kind)).toBe(expected);
  });

  it('adds no suffix twice: a unit or type word the name holds already stays where it is', () => {
    expect(prometheusMetricName('process.cpu.seconds', 's', 'counter')).toBe('process_cpu_seconds_total');
    expect(prometheusMetricName('requests_total', '{request}', 'counter')).toBe('requests_total');
    expect(prometheusMetricName('cache.hit_ratio', '1', 'gauge')).toBe('cache_hit_ratio');
    expect(prometheusMetricName('jobs.total.duration', 's', 'counter')).toBe('jobs_duration_seconds_total');
  });

  it('gives `1` no suffix unless the metric is a gauge (a count is no ratio), and a name never starts with a digit', () => {
    expect(prometheusMetricName('active.connections', '1', 'other')).toBe('active_connections');
    expect(prometheusMetricName('5xx.responses', '', 'counter')).toBe('_5xx_responses_total');
  });
});

describe('prometheusUnit', () => {
  it.each([
    ['s', 'seconds'],
    ['ms', 'milliseconds'],
    ['By', 'bytes'],
    ['By/s', 'bytes_per_second'],
    ['{decision}', ''],
    ['1', ''],
    ['', ''],
    ['{request}/s', 'per_second'],
  ])('%s → %s', (unit, expected) => {
    expect(prometheusUnit(unit)).toBe(expected);
  });
});
