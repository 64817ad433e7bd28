/**
 * One-request questions to a node other than the gate's poll: whether the lock is still held there
 * (`PTTL`), asked instead of a fan-out of N that the holder would refuse anyway, and keeping a
 * take's key on the gate as a placeholder while it is.
 * @module
 */
import type { AttemptReport } from "../base/report.js";
import { unexpected } from "../core/node-operations.js";
import { extendOne } from "../core/operations/cleanup.js";
import { withinBudget } from "../core/options.js";
import { currentPlaceholderMs, keepPlaceholder } from "./gate-client.js";
import { pauseLimit } from "./limits.js";
import type { Waiter } from "./state.js";

/**
 * How long node `index` still holds the lock, asked with one `PTTL`: a waiter whose gate failed then
 * waits at the cost of one request, not a fan-out of N (2N fenced) that the holder refuses anyway.
 * In ms from the answer (`Infinity` for a key without a TTL); undefined (fan out) when the key is
 * gone or the node did not answer. A gate that answers is back.
 */
async function heldFor(w: Waiter, index: number): Promise<number | undefined> {
  const key = w.request.keys[0] as string;
  const node = w.engine.node(index);
  w.state.polls++;
  let ms: number | undefined;
  const fan = w.engine.fan(
    w.o,
    "acquire",
    w.request.resources,
    {
      yes: "held",
      signal: w.signal,
      meter: w.request.meter,
      task: async (_, context) => {
        context.countRequest();
        const pttl = await node.command(["PTTL", key], context.signal);
        // Anything but a number (a proxy that echoes the request, say) is no proof of a holder.
        if (typeof pttl !== "number") throw unexpected(node, "PTTL", pttl);
        if (pttl === -2) return "not-held";
        ms = pttl < 0 ? Number.POSITIVE_INFINITY : pttl;
        return "held";
      },
    },
    w.o.requestTimeoutMs,
    [index],
  );
  const [outcome] = await fan.outcomes;
  const answered = outcome?.outcome === "held" || outcome?.outcome === "not-held";
  if (index === w.gate && answered) w.state.gateDown = false;
  return outcome?.outcome === "held" ? ms : undefined;
}

/** Whether node `index` still holds the lock (see {@link heldFor}). */
export async function stillHeld(w: Waiter, index: number): Promise<boolean> {
  return (await heldFor(w, index)) !== undefined;
}

/**
 * A poll just took the gate with `token`, but the gate had been free with no release through it
 * since the take before (`unreleasedTakes`): a placeholder ran out, or a lock expired. Most likely
 * the holder that won the other nodes without the gate still has them. Ask one of them with one
 * `PTTL` (see {@link heldFor}) before fanning out to all; while it still holds the key, keep
 * our key on the gate as a placeholder, as a failed take would (see `gate-client.growPlaceholder`):
 * one request to shorten it, none once placeholders have grown to the TTL the take set. Such a take
 * costs 2 or 3 requests with its poll instead of N + 1: behind a hold of seconds won without the
 * gate, the line takes the gate again every time a placeholder runs out.
 *
 * The placeholder ends no later than the key the `PTTL` read runs out, and, until keys are found
 * to outlive an expiry read (a holder that extends them), the budget's spacing does not put our
 * next poll past that (`heldElsewhereUntil`, see `in-line.pollAtExpiry`): behind a holder that
 * died, the line takes the lock when its keys expire, not when a placeholder grown past them, or a
 * poll spaced for the rest of the patience, comes. True when the placeholder is kept; false to fan
 * out as usual (the key is free there, the probe failed or was aborted, or the budget has no room
 * for both requests).
 */
export async function keptOutOfStep(w: Waiter, token: string): Promise<boolean> {
  const s = w.state;
  const nodes = w.engine.nodes.length;
  if (s.unreleasedTakes === 0 || !withinBudget(w.o, w.requestsSent(), 2, nodes)) return false;
  const heldMs = await heldFor(w, heldElsewhere(w) ?? (w.gate + 1) % nodes);
  if (heldMs === undefined) return false;
  const now = w.now();
  // Keys that outlived the expiry we read were extended (or taken again): that holder's expiries
  // are no time to come back at, and a poll at each would spend the budget.
  if (s.heldElsewhereUntil > 0 && now >= s.heldElsewhereUntil) s.heldElsewhereUntil = Number.NEGATIVE_INFINITY;
  if (s.heldElsewhereUntil !== Number.NEGATIVE_INFINITY) s.heldElsewhereUntil = now + heldMs;
  // Our placeholder ends no later than the holder's keys as read, nor than our patience: past
  // either, it would keep the line, and our own last poll, from a lock that may be free.
  const ms = Math.max(1, Math.min(currentPlaceholderMs(w), heldMs, pauseLimit(w) - now));
  // The take set the key for the TTL: a placeholder grown to the TTL needs no request to shorten
  // it. Once that request is sent, the token is a placeholder's, whatever its answer: a request
  // that timed out may still land, after a grant, and cut the gate's key under the claim that
  // counted it at the TTL. (Had it not landed, our key outlasts the placeholder, as a holder's.)
  if (ms < w.request.ttlMs) await extendOne(w.engine, w.request, token, w.gate, ms, w.o.requestTimeoutMs);
  keepPlaceholder(w, token, ms);
  return true;
}

/**
 * The node other than the gate that said "held" in our latest attempt where one did, else none
 * (the gate's neighbour is asked then): a node that answered, and held the key, most likely
 * still does, where the neighbour may be down.
 */
function heldElsewhere(w: Waiter): number | undefined {
  for (let r = w.reports.length - 1; r >= 0; r--) {
    const held = (w.reports[r] as AttemptReport).nodes.findIndex((n, i) => n.outcome === "held" && i !== w.gate);
    if (held >= 0) return held;
  }
  return undefined;
}
