import "vitest";

declare module "vitest" {
  interface ProvidedContext {
    /** A loopback URL where nothing listens (test/runtimes/setup/dead-endpoint.ts). */
    deadUrl: string;
    /** The bundled workerd suite worker (test/runtimes/setup/workerd-script.ts). */
    workerdScript: string;
  }
}
