/**
 * Entry point of one client process of the chaos harness (bundled with the library under test by
 * `build.ts`). Its workers (`client-worker.ts`, each with its own Redlock client, so that several
 * workers of one process share the isolate's state as requests of one isolate do) run the random
 * workload (`client-workload.ts`) or steps the harness drives, and report every operation as
 * history events over IPC, stamped on the harness clock.
 *
 * With a second cluster in the config, the odd workers lock on it: two clusters in one process.
 * @module
 */
import { codeOf, stall } from "./client-support.js";
import { send, Worker, type WorkerCluster } from "./client-worker.js";
import { misuseStaleToken, runWorkload } from "./client-workload.js";
import { harnessNow } from "./clock.js";
import type { ClientConfig, Target, ToClient } from "./protocol.js";
import { createRng, type Rng } from "./rng.js";

/** The cluster worker `j` locks on: the second one (when there is one) for the odd workers. */
function clusterOf(config: ClientConfig, j: number): WorkerCluster {
  const twin = config.twin;
  if (twin && j % 2 === 1) return twin;
  return { nodes: config.nodes, redisPorts: config.redisPorts, tag: "", nodeOffset: 0 };
}

/** The targets in turn for the workers of process `c<n>`, from target `n × workers` on. */
function targetsInTurn(config: ClientConfig, workers: number): () => Target {
  let next = Number(config.id.slice(1)) * workers;
  return () => config.resources[next++ % config.resources.length] as Target;
}

function main(): void {
  let workers: Worker[] = [];
  // Driven steps run one after another per worker; the workers' steps run side by side.
  let steps: Promise<unknown>[] = [];
  let workload: Promise<unknown> = Promise.resolve();
  let rng: Rng | undefined;
  process.on("message", (message: ToClient) => {
    switch (message.type) {
      case "init": {
        const { config } = message;
        const count = Math.max(1, config.workers ?? 1);
        const inTurn = config.targetsInTurn ? targetsInTurn(config, count) : undefined;
        workers = Array.from(
          { length: count },
          (_, j) =>
            new Worker({ ...config, id: count === 1 ? config.id : `${config.id}.${j}` }, clusterOf(config, j), inTurn),
        );
        steps = workers.map(() => Promise.resolve());
        rng = createRng(config.seed).fork(`${config.id}/stale-tokens`);
        send({ type: "ready" });
        break;
      }
      case "ping":
        send({ type: "pong", id: message.id, t: harnessNow() });
        break;
      case "run":
        workload = Promise.all(workers.map((w) => runWorkload(w, message.untilMs)));
        break;
      case "do": {
        const j = message.op.worker ?? 0;
        steps[j] = (steps[j] ?? Promise.resolve()).then(async () => {
          try {
            const result = (await workers[j]?.perform(message.op)) ?? { ok: false, detail: "no such worker" };
            send({ type: "done", id: message.id, ...result });
          } catch (error) {
            send({ type: "done", id: message.id, ok: false, detail: codeOf(error) });
          }
        });
        break;
      }
      case "stale": {
        // Another client instance than the one that released it, on the same cluster when possible.
        const { stale } = message;
        const others = workers.filter((w) => w.id !== stale.from);
        const candidates = others.filter((w) => w.tag === stale.tag);
        const pool = candidates.length > 0 ? candidates : others;
        if (rng && pool.length > 0) misuseStaleToken(rng.pick(pool), rng, stale);
        break;
      }
      case "stall":
        stall(message.ms);
        break;
      case "stop":
        for (const w of workers) w.stop();
        void Promise.all([workload, ...steps])
          .then(() => Promise.all(workers.map((w) => w.close())))
          .finally(() => {
            send({ type: "stopped" });
            process.disconnect?.();
            setTimeout(() => process.exit(0), 50).unref();
          });
        break;
    }
  });
  process.on("disconnect", () => setTimeout(() => process.exit(0), 200).unref());
}

main();
