// The little of Deno's API that portable.deno.ts uses, for tsc (Deno itself brings its own types
// and never reads this file).
declare const Deno: {
  test(name: string, fn: () => Promise<void>): void;
  env: { get(key: string): string | undefined };
};
