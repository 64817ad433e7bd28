/** Small statistics helpers for the benchmark's figures. */

/** The q-quantile (0..1) of `values` by linear interpolation; NaN when empty. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.ceil(position);
  const a = sorted[low] as number;
  const b = sorted[high] as number;
  return a + (b - a) * (position - low);
}

/** The median; NaN when empty. */
export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/** Jain's fairness index of per-client shares: 1 when all equal, 1/n when one client gets everything. */
export function jainIndex(shares: readonly number[]): number {
  const sum = shares.reduce((a, b) => a + b, 0);
  const squares = shares.reduce((a, b) => a + b * b, 0);
  if (shares.length === 0 || squares === 0) return Number.NaN;
  return (sum * sum) / (shares.length * squares);
}

/** Rounds for display: integers stay, others get `digits` decimals. */
export function fmt(value: number, digits = 1): string {
  if (!Number.isFinite(value)) return "–";
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(digits);
}

/** A ratio `a / b` formatted as "1.23×". */
export function ratio(a: number, b: number, digits = 2): string {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b === 0) return "–";
  return `${(a / b).toFixed(digits)}×`;
}

/** Shuffles a copy with a rotating offset: round r starts at item r, so every item takes every position. */
export function rotate<T>(items: readonly T[], round: number): T[] {
  const n = items.length;
  return Array.from({ length: n }, (_, i) => items[(i + round) % n] as T);
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
