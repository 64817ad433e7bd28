// The bindings of the vitest pool's runner worker, as vitest.config.ts ("runtime-workerd") sets
// them. Declared by hand so the test type-checks without @cloudflare/workers-types, whose globals
// clash with the DOM lib of the other test files.
declare module "cloudflare:workers" {
  export const env: {
    /** Service binding to the worker that runs the portable suite (test/runtimes/workerd/worker.ts). */
    readonly SUITE: { fetch(input: string, init?: RequestInit): Promise<Response> };
  };
}
