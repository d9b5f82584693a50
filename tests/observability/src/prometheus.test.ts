/**
 * The examples' Prometheus endpoint scraped by a real Prometheus server (Debian's `prometheus`): known traffic in,
 * PromQL answers out. Prometheus runs on a free port with a throwaway configuration and storage folder, scraping
 * the example every second; the test waits for scrapes (polling the query API) and never for a length of time.
 *
 * Without a `prometheus` binary the suite is skipped with the reason, unless PETSTORE_REQUIRE_PROMETHEUS=1 or CI
 * is set (`.ci/run` installs it), where it fails.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startExample, stopExamples, type RunningExample } from '../../../examples/src/spawn-example.js';

const PROMETHEUS = process.env['PROMETHEUS_BIN'] || 'prometheus';
const required = process.env['PETSTORE_REQUIRE_PROMETHEUS'] === '1' || Boolean(process.env['CI']);
const installed = spawnSync(PROMETHEUS, ['--version'], { stdio: 'ignore' }).status === 0;
const missing = installed ? undefined : `no ${PROMETHEUS} binary (Debian: apt-get install prometheus; or set PROMETHEUS_BIN)`;

/** A port nobody listens on now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** Starts Prometheus scraping `target` (`host:port`) every second; resolves once it serves queries. */
async function startPrometheus(target: string): Promise<{ url: string; stop(): Promise<void> }> {
  const folder = await mkdtemp(join(tmpdir(), 'petstore-prometheus-'));
  const config = join(folder, 'prometheus.yml');
  await writeFile(
    config,
    ['global:', '  scrape_interval: 1s', '  evaluation_interval: 1s', 'scrape_configs:', '  - job_name: petstore', '    static_configs:', `      - targets: ['${target}']`, ''].join('\n'),
  );
  const port = await freePort();
  const child: ChildProcess = spawn(
    PROMETHEUS,
    [`--config.file=${config}`, `--storage.tsdb.path=${join(folder, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    await rm(folder, { recursive: true, force: true });
  };
  const url = `http://127.0.0.1:${port}`;
  // Ready once its readiness endpoint answers 200 (a wait for an event; the deadline only ends a failed wait).
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`prometheus exited (${child.exitCode}):\n${log}`);
    const ready = await fetch(`${url}/-/ready`).then((response) => response.ok, () => false);
    if (ready) return { url, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`prometheus did not get ready:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The value of an instant PromQL query summed to one number, or `undefined` while it has no sample. */
async function query(prometheus: string, promql: string): Promise<number | undefined> {
  const response = await fetch(`${prometheus}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await response.json()) as { data?: { result?: Array<{ value: [number, string] }> } };
  const result = body.data?.result ?? [];
  return result.length === 0 ? undefined : Number(result[0]!.value[1]);
}

describe('the Prometheus endpoint (PETSTORE_METRICS_PORT), scraped by a real Prometheus', () => {
  let example: RunningExample;
  let metricsUrl: string;
  let prometheus: { url: string; stop(): Promise<void> } | undefined;

  beforeAll(async () => {
    if (missing !== undefined) return; // the test skips, or fails where Prometheus is required
    example = await startExample('fastify-server.ts', {
      PETSTORE_API_KEYS: 'prom-free-key-3c9a:free,prom-tight-key-71d0:enterprise:2:100',
      PETSTORE_METRICS_PORT: '0',
      // Empty is unset to the SDK: the default service name, whatever the environment running the test says.
      OTEL_SERVICE_NAME: '',
      OTEL_RESOURCE_ATTRIBUTES: '',
    });
    metricsUrl = /^Prometheus metrics \(PETSTORE_METRICS_PORT, PETSTORE_METRICS_HOST\) at (http:\/\/\S+\/metrics)$/m.exec(example.output)![1]!;
    prometheus = await startPrometheus(new URL(metricsUrl).host);
  }, 90_000);

  afterAll(async () => {
    stopExamples();
    await prometheus?.stop();
  });

  it('answers PromQL with the traffic sent: N admitted, M refused with 429, K refused with 401', async ({ skip }) => {
    if (!required) skip(missing !== undefined, missing);
    expect(missing, 'Prometheus is required here (CI or PETSTORE_REQUIRE_PROMETHEUS=1)').toBeUndefined();
    const get = (authorization?: string) =>
      fetch(`${example.url}/v1/categories`, authorization === undefined ? {} : { headers: { authorization } }).then((response) => response.status);
    const statuses: number[] = [];
    for (let index = 0; index < 3; index++) statuses.push(await get('Bearer prom-free-key-3c9a'));
    for (let index = 0; index < 5; index++) statuses.push(await get('Bearer prom-tight-key-71d0')); // 2 admitted, then 429s
    for (let index = 0; index < 4; index++) statuses.push(await get(index % 2 === 0 ? undefined : 'Bearer not-a-key-5e1b'));
    const admitted = statuses.filter((status) => status === 200).length;
    const limited = statuses.filter((status) => status === 429).length;
    const unauthorized = statuses.filter((status) => status === 401).length;
    expect([admitted, limited, unauthorized]).toEqual([5, 3, 4]);

    // The endpoint itself, as Prometheus reads it.
    const exposition = await (await fetch(metricsUrl)).text();
    expect(exposition).toContain('# TYPE petstore_rate_limit_decisions_total counter');
    // Named with the unit, as OpenTelemetry's Prometheus rules (and the Collector, Go and .NET exporters) name it.
    expect(exposition).toContain('# TYPE http_server_request_duration_seconds histogram');
    expect(exposition).not.toContain('# TYPE http_server_request_duration histogram');

    const queries = {
      admitted: 'sum(petstore_rate_limit_decisions_total{outcome="admitted",plan!="anonymous"})',
      limited: 'sum(petstore_rate_limit_decisions_total{outcome="limited"})',
      unauthorized: 'sum(petstore_auth_failures_total)',
      answered429: 'sum(http_server_request_duration_seconds_count{http_route="/v1/categories",http_response_status_code="429"})',
      answered: 'sum(http_server_request_duration_seconds_bucket{http_route="/v1/categories",le="+Inf"})',
      durationsSummed: 'count(http_server_request_duration_seconds_sum{http_route="/v1/categories"} > 0)',
      // The resource, as target_info: the examples' default service name (OTEL_SERVICE_NAME unset).
      service: 'count(target_info{job="petstore",service_name="petstore-example"})',
      // The join docs/observability.md shows, putting the service on each series: one per status code.
      serviceJoined:
        'count(http_server_request_duration_seconds_count{http_route="/v1/categories"} * on (job, instance) group_left (service_name) target_info{service_name="petstore-example"})',
    };
    // One series with a positive sum per status code answered: 200, 429 and 401.
    const expected = { admitted, limited, unauthorized, answered429: limited, answered: statuses.length, durationsSummed: 3, service: 1, serviceJoined: 3 };
    // Until a scrape after the traffic has been stored (a few scrapes, one a second), or a generous deadline.
    let answers: Record<string, number | undefined> = {};
    const deadline = Date.now() + 60_000;
    do {
      await new Promise((resolve) => setTimeout(resolve, 250));
      answers = Object.fromEntries(await Promise.all(Object.entries(queries).map(async ([name, promql]) => [name, await query(prometheus!.url, promql)])));
    } while (JSON.stringify(answers) !== JSON.stringify(expected) && Date.now() < deadline);
    expect(answers).toEqual(expected);
  }, 120_000);
});
