/**
 * Where the isolates of the isolates parts stand: each client process's own round trip to every
 * lock node and to the data node, in two profiles (uniform +20 ms; geo, from a published table
 * of AWS inter-region round trips), and the physical floor of a fair handoff that follows.
 */

/** Round trips of one isolate (client process), in milliseconds. */
export interface Placement {
  /** Where the isolate runs (a region, or "–" in the uniform profile). */
  region: string;
  /** Round trip to each lock node, by node index. */
  nodeRttMs: number[];
  /** Round trip to the data node the critical section reads and writes. */
  dataRttMs: number;
}

export type ProfileId = "uniform" | "geo";

export interface LatencyProfile {
  id: ProfileId;
  /** Short name for tables. */
  name: string;
  /** How isolate k of P is placed, for N lock nodes. */
  placement(k: number, n: number): Placement;
  /** Method lines for RESULTS.md. */
  method: string[];
}

const UNIFORM_RTT_MS = 20;

export const UNIFORM: LatencyProfile = {
  id: "uniform",
  name: "+20 ms",
  placement: (_k, n) => ({
    region: "–",
    nodeRttMs: Array.from({ length: n }, () => UNIFORM_RTT_MS),
    dataRttMs: UNIFORM_RTT_MS,
  }),
  method: [
    `Latency: every isolate is ${UNIFORM_RTT_MS} ms (round trip) from every lock node and from the data node, as the hot-key part's "+20 ms" profile, but added inside each client process (see below) rather than at the nodes.`,
  ],
};

/**
 * The source of the geo profile's round trips: the table "Latency Between AWS Global Regions"
 * (average ping round trip in ms, from the row's region to the column's), as republished in text
 * form at this address. Only the five US and EU regions are used: every round trip between them
 * is under 170 ms.
 */
export const GEO_SOURCE =
  'https://acomputerscientistlearnsaws.blogspot.com/2017/04/aws-regions.html (table "Latency Between AWS Global Regions", average ping round trips between AWS regions, ms)';

/** The regions used, with the table's names. */
export const GEO_REGIONS = {
  "us-east-1": "US East (N. Virginia)",
  "us-west-1": "US West (N. California)",
  "us-west-2": "US West (Oregon)",
  "eu-west-1": "EU (Ireland)",
  "eu-central-1": "EU (Frankfurt)",
} as const;

export type GeoRegion = keyof typeof GEO_REGIONS;

/** Round trips from the row's region to the column's, in ms, as the source's table gives them. */
export const GEO_RTT_MS: Record<GeoRegion, Record<GeoRegion, number>> = {
  "us-east-1": { "us-east-1": 0, "us-west-1": 72.74, "us-west-2": 86.98, "eu-west-1": 80.55, "eu-central-1": 88.66 },
  "us-west-1": { "us-east-1": 71.63, "us-west-1": 0, "us-west-2": 19.46, "eu-west-1": 153.2, "eu-central-1": 166.6 },
  "us-west-2": { "us-east-1": 88.68, "us-west-1": 19.2, "us-west-2": 0, "eu-west-1": 137, "eu-central-1": 159.5 },
  "eu-west-1": { "us-east-1": 80.52, "us-west-1": 153.2, "us-west-2": 137, "eu-west-1": 0, "eu-central-1": 19.56 },
  "eu-central-1": { "us-east-1": 88.62, "us-west-1": 166.6, "us-west-2": 159.5, "eu-west-1": 19.55, "eu-central-1": 0 },
};

/**
 * An isolate in the same region as a node (an edge location in the same metro): the table gives
 * 0 there; 4 ms is our assumption, a little above the 0.25–3.37 ms measured between availability
 * zones of one region (xkyle.com, "Measuring AWS Region and AZ Latency").
 */
export const SAME_REGION_RTT_MS = 4;

/**
 * Lock node i is in GEO_NODE_REGIONS[i]. Node 0 is where the data lives, and the node
 * @upstash/lock uses: a single-node lock sits next to the data, as a user of one Upstash database
 * in the data's region has it.
 */
export const GEO_NODE_REGIONS: readonly GeoRegion[] = [
  "us-east-1",
  "eu-west-1",
  "us-west-2",
  "eu-central-1",
  "us-west-1",
];
/** Isolate k runs in GEO_ISOLATE_REGIONS[k % 4]. */
export const GEO_ISOLATE_REGIONS: readonly GeoRegion[] = ["us-east-1", "eu-west-1", "us-west-2", "eu-central-1"];
/** The data node's region. */
export const GEO_DATA_REGION: GeoRegion = "us-east-1";

function geoRtt(from: GeoRegion, to: GeoRegion): number {
  return from === to ? SAME_REGION_RTT_MS : GEO_RTT_MS[from][to];
}

export const GEO: LatencyProfile = {
  id: "geo",
  name: "geo",
  placement: (k, n) => {
    const region = GEO_ISOLATE_REGIONS[k % GEO_ISOLATE_REGIONS.length] as GeoRegion;
    return {
      region,
      nodeRttMs: Array.from({ length: n }, (_, i) => geoRtt(region, GEO_NODE_REGIONS[i % GEO_NODE_REGIONS.length]!)),
      dataRttMs: geoRtt(region, GEO_DATA_REGION),
    };
  },
  method: [
    `Latency: isolates in ${GEO_ISOLATE_REGIONS.length} regions (isolate k in ${GEO_ISOLATE_REGIONS.join(", ")}[k mod ${GEO_ISOLATE_REGIONS.length}]), lock nodes in ${GEO_NODE_REGIONS.length} (node i in ${GEO_NODE_REGIONS.join(", ")}[i]), the data node and @upstash/lock's single node (node 0) in ${GEO_DATA_REGION}. Round trips from the published table at ${GEO_SOURCE}; an isolate in a node's own region gets ${SAME_REGION_RTT_MS} ms (the table says 0; our assumption, a little above the 0.25–3.37 ms measured between availability zones of one region by https://www.xkyle.com/Measuring-AWS-Region-and-AZ-Latency/). Round trips used: ${SAME_REGION_RTT_MS}–${Math.max(...Object.values(GEO_RTT_MS).flatMap((row) => Object.values(row)))} ms (tables below).`,
  ],
};

/** The profile's round-trip table as rows: isolate region → each node region and the data. */
export function geoTableRows(): string[][] {
  return GEO_ISOLATE_REGIONS.map((from) => [
    from,
    ...GEO_NODE_REGIONS.map((to) => String(geoRtt(from, to))),
    String(geoRtt(from, GEO_DATA_REGION)),
  ]);
}

/** The quorum-th smallest of `rtts` (quorum = floor(n/2)+1 of the first n). */
export function quorumRtt(rtts: readonly number[], n: number): number {
  const sorted = rtts.slice(0, n).sort((a, b) => a - b);
  return sorted[Math.floor(n / 2)] as number;
}

/**
 * The physical floor of one fair handoff to an isolate, in ms: its critical section (two round
 * trips to the data node) plus one round trip to its quorum-th nearest lock node (the release
 * landing and the next take overlapping at best). `baseMs` is the loopback cost of one request,
 * measured, added to each round trip. `n` is the nodes the system locks on (1 for @upstash/lock:
 * node 0).
 */
export function floorCycleMs(placement: Placement, n: number, baseMs: number): number {
  return 2 * (placement.dataRttMs + baseMs) + quorumRtt(placement.nodeRttMs, n) + baseMs;
}
