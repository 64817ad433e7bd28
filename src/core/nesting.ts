/**
 * Telling a nested acquisition from a concurrent one: inside a `using()` routine, acquiring a
 * resource the routine already holds would wait for itself (until its patience or deadline). Where
 * the runtime tracks an async context (`AsyncLocalStorage`: a global on Vercel Edge and Deno,
 * `process.getBuiltinModule` on Node, Bun and Workers with Node.js compatibility), a `using()`
 * routine carries the keys it holds, and such a call fails at once. Without one (a plain Worker),
 * nothing is detected: the call waits like any other for the lock. Looked up at run time, never
 * imported: the library needs no Node.js API.
 * @module
 */

interface ContextStorage {
  getStore(): ReadonlySet<string> | undefined;
  run<R>(store: ReadonlySet<string>, callback: () => R): R;
}

type StorageClass = new () => ContextStorage;

function findStorage(): ContextStorage | undefined {
  const scope = globalThis as {
    AsyncLocalStorage?: StorageClass;
    process?: { getBuiltinModule?: (id: string) => { AsyncLocalStorage?: StorageClass } | undefined };
  };
  try {
    const Storage = scope.AsyncLocalStorage ?? scope.process?.getBuiltinModule?.("node:async_hooks")?.AsyncLocalStorage;
    return Storage ? new Storage() : undefined;
  } catch {
    return undefined;
  }
}

let storage: ContextStorage | undefined | null = null;

function contextStorage(): ContextStorage | undefined {
  if (storage === null) storage = findStorage();
  return storage;
}

/** Run `routine` with `keys` (of one cluster, see `identity.ts`) held in its async context. */
export function runHolding<T>(keys: readonly string[], routine: () => Promise<T>): Promise<T> {
  const context = contextStorage();
  if (context === undefined) return routine();
  const held = new Set(context.getStore());
  for (const key of keys) held.add(key);
  return context.run(held, routine);
}

/** The first of `keys` that the `using()` routine this call runs in holds, if the runtime can tell. */
export function heldByCaller(keys: readonly string[]): string | undefined {
  const held = contextStorage()?.getStore();
  return held === undefined ? undefined : keys.find((key) => held.has(key));
}

/** Whether this call runs inside a `using()` routine, where the runtime can tell: only then does it hold keys. */
export function insideUsing(): boolean {
  return contextStorage()?.getStore() !== undefined;
}
