// The package under test, imported by its name: this resolves through package.json "exports"
// (a package self-reference) to the BUILT dist/, exactly as a user's import does. Every runtime
// file imports it through this shim so that type-checking, which runs before the build, takes
// the types from src/ (edge-redlock.d.ts) while the code that runs is always dist/.
export * from "edge-redlock";
