// Types of ./edge-redlock.js: the public API, read from src/ (dist/ may not be built yet).
export * from "../../src/index.js";
