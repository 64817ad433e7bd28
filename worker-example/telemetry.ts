/**
 * The demo worker's OpenTelemetry: its lock clients are instrumented with `edge-redlock/otel`, and
 * the metrics and a sample of the spans are written to the worker's console (what `npm run dev`,
 * `wrangler dev` and `wrangler tail` show), one line each. `GET /telemetry` flushes the metrics and
 * answers the same lines (`npm run demo` prints them at the end).
 *
 * Console only: the SDK's OTLP exporters of this SDK version would bring a second copy of the SDK
 * (and its logs packages) into the bundle. To send to a collector, put an OTLP exporter where the
 * console exporters are below.
 *
 * Providers are made once per isolate, inside its first request (a Worker may not start timers at
 * startup); metrics are cumulative per isolate and flushed at the end of a request at most every
 * {@link FLUSH_EVERY_MS}.
 */
import type { Meter, Tracer } from "@opentelemetry/api";
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
  type ResourceMetrics,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanExporter,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";

/** The bindings this module reads. */
export interface TelemetryBindings {
  /** Fraction of spans written to the console, from 0 to 1 (OpenTelemetry's sampler argument). @default "0.05" */
  OTEL_TRACES_SAMPLER_ARG?: string;
}

/** Metrics are written at most this often (and on `GET /telemetry`). */
const FLUSH_EVERY_MS = 10_000;
const SUCCESS = 0;

export interface DemoTelemetry {
  readonly meter: Meter;
  readonly tracer: Tracer;
  /** Flush the metrics now; resolves with the lines written. */
  flush(): Promise<string[]>;
  /** Hand a flush to `waitUntil` when the last one is older than {@link FLUSH_EVERY_MS}. */
  flushIfDue(waitUntil: (work: Promise<unknown>) => void): void;
}

let current: DemoTelemetry | undefined;

/** The isolate's telemetry, made on first use. */
export function telemetry(env: TelemetryBindings): DemoTelemetry {
  current ??= create(Number(env.OTEL_TRACES_SAMPLER_ARG ?? 0.05));
  return current;
}

function create(ratio: number): DemoTelemetry {
  const metrics = new LineMetricExporter();
  // Exported when flushed only: the interval is longer than an isolate lives.
  const reader = new PeriodicExportingMetricReader({ exporter: metrics, exportIntervalMillis: 2_000_000_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const tracerProvider = new BasicTracerProvider({
    sampler: new TraceIdRatioBasedSampler(Number.isFinite(ratio) ? Math.min(1, Math.max(0, ratio)) : 0.05),
    spanProcessors: [new SimpleSpanProcessor(new LineSpanExporter())],
  });
  let flushedAt = Date.now();
  const flush = async () => {
    flushedAt = Date.now();
    await reader.forceFlush();
    return metrics.last;
  };
  return {
    meter: meterProvider.getMeter("edge-redlock-demo"),
    tracer: tracerProvider.getTracer("edge-redlock-demo"),
    flush,
    flushIfDue(waitUntil) {
      if (Date.now() - flushedAt >= FLUSH_EVERY_MS) waitUntil(flush());
    },
  };
}

/** `{a=1,b=x}` */
function labels(attributes: Record<string, unknown>): string {
  const parts = Object.entries(attributes).map(([k, v]) => `${k.replace(/^edge_redlock\./, "")}=${String(v)}`);
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

const round = (n: number) => Math.round(n * 1000) / 1000;

/** Metrics as lines: a sum's value, or a histogram's count, mean and max. */
class LineMetricExporter implements PushMetricExporter {
  last: string[] = [];

  export(resourceMetrics: ResourceMetrics, done: Parameters<PushMetricExporter["export"]>[1]): void {
    const lines: string[] = [];
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        const { name, unit } = metric.descriptor;
        for (const point of metric.dataPoints as DataPoint<number | Histogram>[]) {
          const v = point.value;
          const value =
            typeof v === "number"
              ? `${v}`
              : `count=${v.count} mean=${round(v.count === 0 ? 0 : (v.sum ?? 0) / v.count)}${unit} max=${round(v.max ?? 0)}${unit}`;
          lines.push(`otel metric ${name}${labels(point.attributes)} ${value}`);
        }
      }
    }
    this.last = lines;
    for (const line of lines) console.log(line);
    done({ code: SUCCESS });
  }

  selectAggregationTemporality(): AggregationTemporality {
    return AggregationTemporality.CUMULATIVE;
  }

  async forceFlush(): Promise<void> {}

  async shutdown(): Promise<void> {}
}

/** Spans as lines: name, duration, attributes, and each node's answer. */
class LineSpanExporter implements SpanExporter {
  export(spans: ReadableSpan[], done: Parameters<SpanExporter["export"]>[1]): void {
    for (const span of spans) {
      const ms = span.duration[0] * 1000 + span.duration[1] / 1e6;
      const answers = span.events
        .filter((e) => e.name === "edge_redlock.node_answer")
        .map((e) => `${e.attributes?.["edge_redlock.node"]}:${e.attributes?.["edge_redlock.node.outcome"]}`);
      const polls = span.events.filter((e) => e.name === "edge_redlock.poll").length;
      console.log(
        `otel span ${span.name} ${round(ms)}ms ${labels(span.attributes)} answers=[${answers.join(" ")}]${polls ? ` poll_events=${polls}` : ""}`,
      );
    }
    done({ code: SUCCESS });
  }

  async shutdown(): Promise<void> {}
}
