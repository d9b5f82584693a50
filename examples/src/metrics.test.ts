/**
 * The examples' `/metrics` text (`startMetrics`, in process): series named with their unit as OpenTelemetry's
 * Prometheus rules say, and `target_info` naming the service from `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES`.
 * A real Prometheus reads the same endpoint in tests/observability.
 */
import { createPetstore, staticApiKeys } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startMetrics, type MetricsEndpoint } from './metrics.js';

const KEY = 'metrics-names-key-5b0e';

let endpoint: MetricsEndpoint | undefined;

afterEach(async () => {
  await endpoint?.close();
  endpoint = undefined;
  vi.unstubAllEnvs();
});

/** The endpoint's text, once started with the environment as stubbed. */
async function scrape(): Promise<string> {
  endpoint ??= await startMetrics(0, '127.0.0.1');
  const response = await fetch(endpoint.url);
  expect(response.status).toBe(200);
  return response.text();
}

/** The `service_name` label of `target_info`. */
function serviceName(exposition: string): string | undefined {
  return /^target_info\{[^}]*\bservice_name="([^"]*)"/m.exec(exposition)?.[1];
}

describe('the examples\' /metrics (PETSTORE_METRICS_PORT)', () => {
  it('names the series with their unit: http_server_request_duration_seconds_bucket / _sum / _count, counters with _total', async () => {
    const petstore = createPetstore({
      apiKeys: staticApiKeys([{ key: KEY, plan: 'free' }]),
      categories: memoryCategoryStore(),
      rateLimit: { store: memoryRateLimitStore() },
    });
    endpoint = await startMetrics(0, '127.0.0.1');
    const answer = await petstore.fetch(new Request('http://localhost/v1/categories', { headers: { authorization: `Bearer ${KEY}` } }));
    expect(answer.status).toBe(200);
    await answer.body?.cancel();

    const exposition = await scrape();
    expect(exposition).toContain('# TYPE http_server_request_duration_seconds histogram');
    expect(exposition).toContain('# UNIT http_server_request_duration_seconds seconds');
    expect(exposition).toMatch(/^http_server_request_duration_seconds_count\{[^}]*http_route="\/v1\/categories"[^}]*\} 1$/m);
    expect(exposition).toMatch(/^http_server_request_duration_seconds_sum\{/m);
    expect(exposition).toMatch(/^http_server_request_duration_seconds_bucket\{[^}]*le="\+Inf"[^}]*\} 1$/m);
    expect(exposition).toMatch(/^petstore_store_operation_duration_seconds_count\{/m);
    expect(exposition).toMatch(/^petstore_rate_limit_decisions_total\{[^}]*outcome="admitted"[^}]*\} 1$/m);
    expect(exposition).not.toMatch(/^http_server_request_duration_(count|sum|bucket)\b/m);
  });

  it('names the service petstore-example by default (not unknown_service:<node>) in target_info', async () => {
    vi.stubEnv('OTEL_SERVICE_NAME', undefined);
    vi.stubEnv('OTEL_RESOURCE_ATTRIBUTES', undefined);
    const exposition = await scrape();
    expect(serviceName(exposition)).toBe('petstore-example');
    expect(exposition).toMatch(/^target_info\{[^}]*telemetry_sdk_language="nodejs"/m);
  });

  it('takes the service name from OTEL_SERVICE_NAME and more attributes from OTEL_RESOURCE_ATTRIBUTES', async () => {
    vi.stubEnv('OTEL_SERVICE_NAME', 'petstore-eu');
    vi.stubEnv('OTEL_RESOURCE_ATTRIBUTES', 'service.name=overridden,deployment.environment.name=staging');
    const exposition = await scrape();
    expect(serviceName(exposition)).toBe('petstore-eu');
    expect(exposition).toMatch(/^target_info\{[^}]*deployment_environment_name="staging"/m);
  });

  it('takes the service name from OTEL_RESOURCE_ATTRIBUTES when OTEL_SERVICE_NAME is not set', async () => {
    vi.stubEnv('OTEL_SERVICE_NAME', undefined);
    vi.stubEnv('OTEL_RESOURCE_ATTRIBUTES', 'service.name=petstore-from-attributes');
    expect(serviceName(await scrape())).toBe('petstore-from-attributes');
  });
});
