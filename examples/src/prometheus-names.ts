/**
 * Prometheus metric names as OpenTelemetry's Prometheus compatibility rules give them: the unit as a suffix before
 * the type's (`http.server.request.duration`, `s`, histogram → `http_server_request_duration_seconds`), what the
 * Collector, the Go and the .NET exporters write. `@opentelemetry/exporter-prometheus` adds no unit suffix
 * (opentelemetry-js issue 3466), so the examples' endpoint renames the collected metrics with this before the
 * exporter's serializer writes them; the OpenTelemetry side (instrument names, other readers) is untouched.
 *
 * @see https://opentelemetry.io/docs/specs/otel/compatibility/prometheus_and_openmetrics/#metric-metadata-1
 */
import { DataPointType, type MetricData, type ResourceMetrics } from '@opentelemetry/sdk-metrics';

// UCUM units as words, the table the Collector's and Prometheus's translator (prometheus/otlptranslator) use.
const UNIT_WORDS: Readonly<Record<string, string>> = {
  d: 'days',
  h: 'hours',
  min: 'minutes',
  s: 'seconds',
  ms: 'milliseconds',
  us: 'microseconds',
  ns: 'nanoseconds',
  By: 'bytes',
  KiBy: 'kibibytes',
  MiBy: 'mebibytes',
  GiBy: 'gibibytes',
  TiBy: 'tibibytes',
  KBy: 'kilobytes',
  MBy: 'megabytes',
  GBy: 'gigabytes',
  TBy: 'terabytes',
  m: 'meters',
  V: 'volts',
  A: 'amperes',
  J: 'joules',
  W: 'watts',
  g: 'grams',
  Cel: 'celsius',
  Hz: 'hertz',
  '1': '',
  '%': 'percent',
};

// The denominator of `x/y` units: `By/s` → `bytes_per_second`.
const PER_UNIT_WORDS: Readonly<Record<string, string>> = { s: 'second', m: 'minute', h: 'hour', d: 'day', w: 'week', mo: 'month', y: 'year' };

/** How Prometheus types a metric, as far as its name is concerned. */
export type PrometheusNameKind = 'counter' | 'gauge' | 'other';

/** `unit` in `words`, as a Prometheus name part: '' for none, `1` or an annotation (`{decision}`: a count is unitless). */
function unitPart(unit: string | undefined, words: Readonly<Record<string, string>>): string {
  const trimmed = unit?.trim() ?? '';
  if (trimmed === '' || /[{}]/.test(trimmed)) return '';
  return (words[trimmed] ?? trimmed).replace(/[^a-zA-Z0-9:]+/g, '_').replace(/^_+|_+$/g, '');
}

/** The parts of a unit's name: `By/s` → `bytes` and `per_second`; '' where there is none. */
function unitParts(unit: string): { main: string; per: string } {
  const slash = unit.indexOf('/');
  const main = unitPart(slash === -1 ? unit : unit.slice(0, slash), UNIT_WORDS);
  const per = slash === -1 ? '' : unitPart(unit.slice(slash + 1), PER_UNIT_WORDS);
  return { main, per: per === '' ? '' : `per_${per}` };
}

/**
 * The Prometheus unit of an OpenTelemetry (UCUM) unit: `s` → `seconds`, `By/s` → `bytes_per_second`, `ms` →
 * `milliseconds` (named, not converted); '' for `1`, for an annotation such as `{decision}` and for none.
 */
export function prometheusUnit(unit: string): string {
  const { main, per } = unitParts(unit);
  return [main, per].filter((part) => part !== '').join('_');
}

/**
 * The Prometheus name of an OpenTelemetry metric: invalid characters (`.`, `-`) as `_`, then the unit (unless a
 * `_`-separated part of the name is that unit already), then `_total` for a counter (monotonic sum) and `_ratio`
 * for a gauge of unit `1`, each once. Histograms get `_bucket` / `_sum` / `_count` from the serializer.
 *
 * @example prometheusMetricName('http.server.request.duration', 's', 'other') // 'http_server_request_duration_seconds'
 */
export function prometheusMetricName(name: string, unit: string, kind: PrometheusNameKind): string {
  const tokens = name.split(/[^a-zA-Z0-9:]+/).filter((token) => token !== '');
  const { main, per } = unitParts(unit);
  if (main !== '' && !tokens.includes(main)) tokens.push(main);
  if (per !== '') tokens.push(per);
  const typeSuffix = kind === 'counter' ? 'total' : kind === 'gauge' && unit === '1' ? 'ratio' : undefined;
  const named = typeSuffix === undefined ? tokens : [...tokens.filter((token) => token !== typeSuffix), typeSuffix];
  const joined = named.join('_');
  return /^[0-9]/.test(joined) ? `_${joined}` : joined;
}

/** The kind of a collected metric: a monotonic sum is a counter, a gauge a gauge (a non-monotonic sum is not one). */
function kindOf(metric: MetricData): PrometheusNameKind {
  if (metric.dataPointType === DataPointType.SUM && metric.isMonotonic) return 'counter';
  return metric.dataPointType === DataPointType.GAUGE ? 'gauge' : 'other';
}

/**
 * A copy of collected metrics whose names are their Prometheus names ({@link prometheusMetricName}) and whose
 * units are their Prometheus units (the `# UNIT` line), for `PrometheusSerializer.serialize`. `resourceMetrics`
 * is not changed.
 */
export function withPrometheusNames(resourceMetrics: ResourceMetrics): ResourceMetrics {
  return {
    resource: resourceMetrics.resource,
    scopeMetrics: resourceMetrics.scopeMetrics.map((scope) => ({
      ...scope,
      metrics: scope.metrics.map((metric) => ({
        ...metric,
        descriptor: {
          ...metric.descriptor,
          name: prometheusMetricName(metric.descriptor.name, metric.descriptor.unit, kindOf(metric)),
          unit: prometheusUnit(metric.descriptor.unit),
        },
      })),
    })),
  };
}
