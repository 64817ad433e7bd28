import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

/**
 * globalSetup of the runtime projects: build dist/ once per run, start 5 local nodes shared by
 * these projects (provided as `nodes`), and pick a closed loopback port (`deadUrl`).
 */
const runtimeSetup = [
  "test/runtimes/setup/build.ts",
  "test/runtimes/setup/nodes.ts",
  "test/runtimes/setup/dead-endpoint.ts",
];

/** Not newer than the workerd that wrangler 4.86 / pool 0.15.1 ship (2026-05-03). */
const COMPATIBILITY_DATE = "2026-05-01";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          environment: "node",
          include: ["test/unit/**/*.test.ts"],
        },
      },
      {
        test: {
          name: "integration",
          environment: "node",
          include: ["test/integration/**/*.test.ts", "test/bridge/**/*.test.ts", "test/nodes/**/*.test.ts"],
          // Starts the shared local nodes (real redis-server + REST bridge) once for the run.
          globalSetup: ["test/support/global-setup.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      // A one-second run of every benchmark part (npm run bench): it runs, and its correctness columns are 0.
      {
        test: {
          name: "bench",
          environment: "node",
          include: ["test/bench/**/*.test.ts"],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
      // The portable suite (test/runtimes/portable-suite.ts) in every runtime, against the built package.
      {
        test: {
          name: "runtime-node",
          environment: "node",
          include: ["test/runtimes/node/**/*.test.ts"],
          globalSetup: runtimeSetup,
          // Node itself loads the package (and so dist/), not vite's transform.
          server: { deps: { external: [/\/test\/runtimes\/edge-redlock\.js$/] } },
          testTimeout: 30_000,
        },
      },
      {
        plugins: [
          cloudflareTest(({ inject }) => ({
            miniflare: {
              compatibilityDate: COMPATIBILITY_DATE,
              serviceBindings: { SUITE: "edge-redlock-suite" },
              // The suite runs in this plain worker: no compatibility flags, so no Node.js APIs.
              workers: [
                {
                  name: "edge-redlock-suite",
                  modules: true,
                  script: inject("workerdScript"),
                  compatibilityDate: COMPATIBILITY_DATE,
                },
              ],
            },
          })),
        ],
        test: {
          name: "runtime-workerd",
          include: ["test/runtimes/workerd/**/*.test.ts"],
          globalSetup: [...runtimeSetup, "test/runtimes/setup/workerd-script.ts"],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: "runtime-edge",
          environment: "node",
          include: ["test/runtimes/edge/**/*.test.ts"],
          globalSetup: runtimeSetup,
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: "runtime-deno",
          environment: "node",
          include: ["test/runtimes/deno/**/*.test.ts"],
          globalSetup: runtimeSetup,
        },
      },
      {
        test: {
          name: "runtime-bun",
          environment: "node",
          include: ["test/runtimes/bun/**/*.test.ts"],
          globalSetup: runtimeSetup,
        },
      },
      // Every TypeScript sample in README.md type-checked against the freshly built package.
      {
        test: {
          name: "readme",
          environment: "node",
          include: ["test/readme/**/*.test.ts"],
          globalSetup: ["test/runtimes/setup/build.ts"],
          testTimeout: 120_000,
        },
      },
      // The fault-injection harness: unit tests of its history format and checkers, and a short
      // seeded run of every scenario against real nodes (tools/chaos).
      {
        test: {
          name: "chaos",
          environment: "node",
          include: ["test/chaos/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      // publint, attw and the tarball's contents, on the freshly built package.
      {
        test: {
          name: "packaging",
          environment: "node",
          include: ["test/runtimes/packaging/**/*.test.ts"],
          globalSetup: ["test/runtimes/setup/build.ts"],
        },
      },
    ],
  },
});
