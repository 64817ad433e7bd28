import { defineConfig } from "tsup";

export default defineConfig({
  entry: {
    index: "src/index.ts",
    "core/index": "src/core/index.ts",
    "fencing/index": "src/fencing/index.ts",
    "upstash/index": "src/upstash/index.ts",
    "hono/index": "src/hono/index.ts",
    "testing/index": "src/testing/index.ts",
    "otel/index": "src/otel/index.ts",
  },
  format: ["esm"],
  dts: true,
  clean: true,
  sourcemap: true,
  target: "es2022",
  platform: "neutral",
  treeshake: true,
});
