/**
 * One-line summaries of an attempt, for error messages.
 * @module
 */
import type { AttemptReport } from "../../base/report.js";

/** "2/5 nodes agreed, quorum 3 (2 acquired, 3 held)". */
export function summary(report: AttemptReport): string {
  const counts = new Map<string, number>();
  for (const n of report.nodes) counts.set(n.outcome, (counts.get(n.outcome) ?? 0) + 1);
  const parts = [...counts].map(([k, v]) => `${v} ${k}`).join(", ");
  return `${report.votes}/${report.nodes.length} nodes agreed, quorum ${report.quorum} (${parts})`;
}
