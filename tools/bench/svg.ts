/** Hand-written SVG line charts: no dependency, open in any browser. */

export interface Series {
  name: string;
  points: [number, number][];
}

export interface LineChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  /** Draw as a step function (for cumulative distributions). */
  step?: boolean;
  /** Logarithmic y axis (values must be > 0). */
  logY?: boolean;
  /** Put x ticks exactly at these values (e.g. the C values). */
  xTicks?: number[];
  /** Optional subtitle line (machine, date). */
  subtitle?: string;
  /** Right end of the x axis (points beyond it are clipped), e.g. to cut a long tail. */
  xMax?: number;
}

const COLORS = [
  "#1f77b4",
  "#d62728",
  "#2ca02c",
  "#ff7f0e",
  "#9467bd",
  "#8c564b",
  "#e377c2",
  "#7f7f7f",
  "#17becf",
  "#bcbd22",
];
const WIDTH = 900;
const HEIGHT = 440;
const MARGIN = { left: 70, right: 320, top: 56, bottom: 56 };

const escapeXml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function niceTicks(min: number, max: number, count = 6): number[] {
  if (!(max > min)) return [min];
  const raw = (max - min) / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? raw;
  const ticks: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

const label = (v: number) => (Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v.toPrecision(2));

/** A line chart as a standalone SVG document. */
export function lineChart(options: LineChartOptions): string {
  const all = options.series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const xs = all.map(([x]) => x);
  const ys = all.map(([, y]) => y).filter((y) => !options.logY || y > 0);
  const xMin = options.xTicks ? Math.min(...options.xTicks) : Math.min(0, ...xs);
  const xMax = options.xMax ?? (options.xTicks ? Math.max(...options.xTicks) : Math.max(...xs, 1));
  const yMin = options.logY ? Math.min(...ys, 1) : 0;
  const yMax = Math.max(...ys, options.logY ? 10 : 1) * (options.logY ? 1.5 : 1.05);
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const sx = (x: number) => MARGIN.left + ((x - xMin) / (xMax - xMin || 1)) * plotW;
  const sy = options.logY
    ? (y: number) =>
        MARGIN.top + plotH - ((Math.log10(y) - Math.log10(yMin)) / (Math.log10(yMax) - Math.log10(yMin) || 1)) * plotH
    : (y: number) => MARGIN.top + plotH - ((y - yMin) / (yMax - yMin || 1)) * plotH;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="system-ui, sans-serif" font-size="12">`,
    `<title>${escapeXml(options.title)}</title>`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<defs><clipPath id="plot"><rect x="${MARGIN.left}" y="${MARGIN.top - 4}" width="${plotW + 4}" height="${plotH + 8}"/></clipPath></defs>`,
    `<text x="${WIDTH / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${escapeXml(options.title)}</text>`,
  );
  if (options.subtitle)
    out.push(`<text x="${WIDTH / 2}" y="40" text-anchor="middle" fill="#555">${escapeXml(options.subtitle)}</text>`);
  const xTicks = options.xTicks ?? niceTicks(xMin, xMax);
  const yTicks = options.logY
    ? Array.from(
        { length: Math.floor(Math.log10(yMax)) - Math.floor(Math.log10(yMin)) + 1 },
        (_, i) => 10 ** (Math.floor(Math.log10(yMin)) + i),
      ).filter((v) => v >= yMin && v <= yMax)
    : niceTicks(yMin, yMax);
  for (const t of yTicks) {
    out.push(
      `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${sy(t).toFixed(1)}" y2="${sy(t).toFixed(1)}" stroke="#e5e5e5"/>`,
      `<text x="${MARGIN.left - 6}" y="${(sy(t) + 4).toFixed(1)}" text-anchor="end">${label(t)}</text>`,
    );
  }
  for (const t of xTicks) {
    out.push(
      `<line y1="${MARGIN.top}" y2="${MARGIN.top + plotH}" x1="${sx(t).toFixed(1)}" x2="${sx(t).toFixed(1)}" stroke="#f0f0f0"/>`,
      `<text x="${sx(t).toFixed(1)}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${label(t)}</text>`,
    );
  }
  out.push(
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`,
    `<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 14}" text-anchor="middle">${escapeXml(options.xLabel)}</text>`,
    `<text transform="translate(18 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(options.yLabel)}</text>`,
  );
  options.series.forEach((series, i) => {
    const color = COLORS[i % COLORS.length];
    const points = series.points.filter(
      ([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!options.logY || y > 0),
    );
    if (points.length > 0) {
      const path: string[] = [];
      points.forEach(([x, y], k) => {
        const px = sx(x).toFixed(1);
        const py = sy(y).toFixed(1);
        if (k === 0) path.push(`M${px},${py}`);
        else if (options.step) path.push(`H${px}V${py}`);
        else path.push(`L${px},${py}`);
      });
      out.push(`<path d="${path.join("")}" fill="none" stroke="${color}" stroke-width="2"/>`);
      if (!options.step) {
        for (const [x, y] of points)
          out.push(`<circle cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="3" fill="${color}"/>`);
      }
    }
    const ly = MARGIN.top + 10 + i * 20;
    const lx = MARGIN.left + plotW + 14;
    out.push(
      `<line x1="${lx}" x2="${lx + 22}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="3"/>`,
      `<text x="${lx + 28}" y="${ly + 4}">${escapeXml(series.name)}</text>`,
    );
  });
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
