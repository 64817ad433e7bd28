// The little of "bun:test" that portable.bun.ts uses, for tsc (Bun itself never reads this file).
declare module "bun:test" {
  export function test(name: string, fn: () => Promise<void>, timeoutMs?: number): void;
}
