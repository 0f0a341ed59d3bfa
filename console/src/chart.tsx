/*
 * A bar chart in plain SVG (no chart library: the page stays light): a y-axis with its unit and three
 * ticks, the first and last x labels, and each bar's exact figure as its tooltip. Every bar carries
 * its key and value as data attributes, so what is drawn can be checked against what was stored.
 */

export interface Bar {
  key: string;
  value: number;
  /** The exact figure behind the value (e.g. wei), kept as a data attribute. */
  exact?: string;
  title: string;
}

/** A round step for the axis: 1, 2 or 5 times a power of ten, at least max / 2. */
export function niceTop(max: number): number {
  if (max <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

export function BarChart({ bars, unit, format, testid, label }: { bars: Bar[]; unit: string; format: (v: number) => string; testid: string; label: string }) {
  const left = 64;
  const w = 12;
  const h = 90;
  const top = niceTop(Math.max(0, ...bars.map((b) => b.value)));
  const width = left + bars.length * w + 4;
  const y = (v: number) => 8 + h - (v / top) * h;
  return (
    <svg data-testid={testid} class="chart" width={width} height={h + 30} viewBox={`0 0 ${width} ${h + 30}`} role="img" aria-label={label}>
      {[0, top / 2, top].map((t) => (
        <g>
          <line x1={left - 3} x2={width} y1={y(t)} y2={y(t)} stroke={t === 0 ? '#999' : '#e3e6eb'} />
          <text x={left - 6} y={y(t) + 3} font-size="9" text-anchor="end">
            {format(t)}
          </text>
        </g>
      ))}
      <text x={2} y={8} font-size="9" fill="#5c6878">
        {unit}
      </text>
      {bars.map((b, i) => {
        const bh = b.value > 0 ? Math.max(1, (b.value / top) * h) : 0;
        return (
          <rect data-key={b.key} data-value={b.exact ?? String(b.value)} x={left + i * w + 1} y={8 + h - bh} width={w - 2} height={bh} fill="#3b6fd8">
            <title>{b.title}</title>
          </rect>
        );
      })}
      {bars.length > 0 && (
        <>
          <text x={left} y={h + 22} font-size="9">
            {bars[0].key}
          </text>
          <text x={width - 4} y={h + 22} font-size="9" text-anchor="end">
            {bars[bars.length - 1].key}
          </text>
        </>
      )}
    </svg>
  );
}

export interface Series {
  key: string;
  label: string;
  color: string;
}

/** One day of a stacked chart: a value per series (in the series' order) and the day's tooltip. */
export interface Stack {
  key: string;
  values: number[];
  title: string;
}

/**
 * Stacked bars in the same style as BarChart, with a legend: one segment per series and day, each
 * carrying its day, series and value as data attributes; the day's tooltip names every series.
 */
export function StackedChart({ stacks, series, unit, format, testid, label }: { stacks: Stack[]; series: Series[]; unit: string; format: (v: number) => string; testid: string; label: string }) {
  const left = 64;
  const w = 12;
  const h = 90;
  const top = niceTop(Math.max(0, ...stacks.map((s) => s.values.reduce((a, b) => a + b, 0))));
  const width = left + stacks.length * w + 4;
  const y = (v: number) => 8 + h - (v / top) * h;
  return (
    <figure class="stacked">
      <svg data-testid={testid} class="chart" width={width} height={h + 30} viewBox={`0 0 ${width} ${h + 30}`} role="img" aria-label={label}>
        {[0, top / 2, top].map((t) => (
          <g>
            <line x1={left - 3} x2={width} y1={y(t)} y2={y(t)} stroke={t === 0 ? '#999' : '#e3e6eb'} />
            <text x={left - 6} y={y(t) + 3} font-size="9" text-anchor="end">
              {format(t)}
            </text>
          </g>
        ))}
        <text x={2} y={8} font-size="9" fill="#5c6878">
          {unit}
        </text>
        {stacks.map((st, i) => {
          let base = 0;
          return (
            <g data-key={st.key}>
              {/* The whole column answers the hover, so an empty day still has its tooltip. */}
              <rect x={left + i * w} y={8} width={w} height={h} fill="transparent">
                <title>{st.title}</title>
              </rect>
              {st.values.map((v, j) => {
                if (v <= 0) return null;
                const y0 = base;
                base += v;
                return (
                  <rect
                    data-key={st.key}
                    data-series={series[j].key}
                    data-value={String(v)}
                    x={left + i * w + 1}
                    y={y(base)}
                    width={w - 2}
                    height={Math.max(1, y(y0) - y(base))}
                    fill={series[j].color}
                  >
                    <title>{st.title}</title>
                  </rect>
                );
              })}
            </g>
          );
        })}
        {stacks.length > 0 && (
          <>
            <text x={left} y={h + 22} font-size="9">
              {stacks[0].key}
            </text>
            <text x={width - 4} y={h + 22} font-size="9" text-anchor="end">
              {stacks[stacks.length - 1].key}
            </text>
          </>
        )}
      </svg>
      <figcaption class="legend">
        {series.map((s) => (
          <span>
            <i style={{ background: s.color }} /> {s.label}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}
