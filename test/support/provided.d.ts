import "vitest";

declare module "vitest" {
  interface ProvidedContext {
    /** The shared local nodes started by test/support/global-setup.ts. */
    nodes: { url: string; token: string }[];
  }
}
