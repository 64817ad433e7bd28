/**
 * The OpenTelemetry SDK set up in memory for a test: a meter whose metrics are read on demand
 * (an in-memory exporter behind a reader that only exports when flushed) and a tracer whose ended
 * spans are kept. Runtime-agnostic (Node and workerd): no Node API.
 */
import type { Attributes, Meter, Tracer } from "@opentelemetry/api";
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

/** One data point: a sum's value, or a histogram's count, sum, min and max. */
export interface Point {
  readonly name: string;
  readonly unit: string;
  readonly attributes: Attributes;
  readonly value: number | { count: number; sum: number; min: number; max: number };
}

export interface TestTelemetry {
  readonly meter: Meter;
  readonly tracer: Tracer;
  /** The providers, to register globally where a test goes through `@opentelemetry/api`. */
  readonly meterProvider: MeterProvider;
  readonly tracerProvider: BasicTracerProvider;
  /** Every metric's data points, cumulative since the start. */
  metrics(): Promise<Point[]>;
  /** Every span ended so far, in the order they ended. */
  spans(): ReadableSpan[];
  shutdown(): Promise<void>;
}

export function testTelemetry(): TestTelemetry {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Exports only when flushed: the interval is far longer than any test.
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 2_000_000_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] });
  return {
    meterProvider,
    tracerProvider,
    meter: meterProvider.getMeter("edge-redlock-test"),
    tracer: tracerProvider.getTracer("edge-redlock-test"),
    async metrics() {
      exporter.reset();
      await reader.forceFlush();
      const points: Point[] = [];
      for (const resource of exporter.getMetrics()) {
        for (const scope of resource.scopeMetrics) {
          for (const metric of scope.metrics) {
            for (const point of metric.dataPoints as DataPoint<number | Histogram>[]) {
              const v = point.value;
              points.push({
                name: metric.descriptor.name,
                unit: metric.descriptor.unit,
                attributes: point.attributes,
                value:
                  typeof v === "number" ? v : { count: v.count, sum: v.sum ?? 0, min: v.min ?? 0, max: v.max ?? 0 },
              });
            }
          }
        }
      }
      return points;
    },
    spans: () => spanExporter.getFinishedSpans(),
    async shutdown() {
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
    },
  };
}

function matches(attributes: Attributes, match: Attributes): boolean {
  return Object.entries(match).every(([k, v]) => attributes[k] === v);
}

/** The points of metric `name` whose attributes include `match`. */
export function pointsOf(points: readonly Point[], name: string, match: Attributes = {}): Point[] {
  return points.filter((p) => p.name === name && matches(p.attributes, match));
}

/** A sum (counter, up-down counter) over the matching points: 0 when there are none. */
export function total(points: readonly Point[], name: string, match: Attributes = {}): number {
  let sum = 0;
  for (const p of pointsOf(points, name, match)) {
    if (typeof p.value !== "number") throw new Error(`${name} is a histogram`);
    sum += p.value;
  }
  return sum;
}

/** A histogram merged over the matching points: count, sum, min, max (count 0 when none). */
export function histogram(
  points: readonly Point[],
  name: string,
  match: Attributes = {},
): { count: number; sum: number; min: number; max: number } {
  const merged = { count: 0, sum: 0, min: Number.POSITIVE_INFINITY, max: Number.NEGATIVE_INFINITY };
  for (const p of pointsOf(points, name, match)) {
    if (typeof p.value === "number") throw new Error(`${name} is not a histogram`);
    merged.count += p.value.count;
    merged.sum += p.value.sum;
    merged.min = Math.min(merged.min, p.value.min);
    merged.max = Math.max(merged.max, p.value.max);
  }
  return merged;
}

/** A span's duration in milliseconds. */
export function spanMs(span: ReadableSpan): number {
  return span.duration[0] * 1000 + span.duration[1] / 1e6;
}

/**
 * Everything exported, as one string: for the check that no secret or resource name reaches
 * telemetry. Numbers are written as `#`: a name of digits ("order:0815") matched the digits of a
 * measured duration (0.000770815…) in a CI run, while names and tokens reach telemetry only as
 * strings.
 */
export function everything(points: readonly Point[], spans: readonly ReadableSpan[]): string {
  return JSON.stringify(
    {
      points,
      spans: spans.map((s) => ({
        name: s.name,
        attributes: s.attributes,
        events: s.events,
        status: s.status,
        links: s.links.map((l) => l.attributes ?? {}),
      })),
    },
    (_key, value: unknown) => (typeof value === "number" ? "#" : value),
  );
}
