// BENCH_PROFILE=1 on PostgreSQL: for each statement shape a round ran, what planning costs against running,
// and what a generic plan (one per statement, as plan_cache_mode=auto may settle on) would read.
//
// Each sample (the SQL and the values of one run) is prepared by name on a connection of its own, then run
// under EXPLAIN (ANALYZE, BUFFERS) EXECUTE in a rolled-back transaction, `runs` times with
// force_custom_plan and `runs` times with force_generic_plan (medians reported). Planning Time under a
// custom plan is what every run pays today; under a generic plan, after the first run, only the lookup.
import pg from 'pg';

export interface Sample {
  sql: string;
  params: unknown[];
  n: number;
}

interface Explained {
  'Planning Time': number;
  'Execution Time': number;
  Plan: Record<string, unknown>;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const shape = (sql: string) => sql.replace(/\s+/g, ' ').trim().slice(0, 110);

/** Relations read by a sequential scan, and the shared buffers the plan touched. */
function scans(plan: Record<string, unknown>) {
  const seq = new Set<string>();
  const walk = (node: Record<string, unknown>) => {
    if (node['Node Type'] === 'Seq Scan') seq.add(String(node['Relation Name']));
    for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? []) walk(child);
  };
  walk(plan);
  return { seqScans: [...seq], sharedBuffers: Number(plan['Shared Hit Blocks'] ?? 0) + Number(plan['Shared Read Blocks'] ?? 0) };
}

/** A value as the text PostgreSQL reads for its type (what the driver would have sent). */
function text(v: unknown): string {
  if (Array.isArray(v)) return `{${v.map((x) => (x === null || x === undefined ? 'NULL' : `"${text(x).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`)).join(',')}}`;
  if (Buffer.isBuffer(v)) return `\\x${v.toString('hex')}`;
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'object' && v !== null) return JSON.stringify(v);
  return String(v);
}
const literal = (v: unknown, type: string) => (v === null || v === undefined ? `NULL::${type}` : `${pg.escapeLiteral(text(v))}::${type}`);

export async function planProbe(url: string, samples: Sample[], perSendOf: (n: number) => number, runs = 7) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const out: unknown[] = [];
  try {
    for (const s of [...samples].sort((a, b) => b.n - a.n)) {
      if (!s.params.length) continue;
      try {
        await c.query('DEALLOCATE ALL');
        await c.query(`PREPARE probe AS ${s.sql}`);
        const types = (await c.query<{ t: string[] }>(`SELECT parameter_types::text[] AS t FROM pg_prepared_statements WHERE name = 'probe'`)).rows[0].t;
        const args = s.params.map((v, i) => literal(v, types[i])).join(', ');
        const measure = async (mode: string) => {
          await c.query(`SET plan_cache_mode = ${mode}`);
          const got: Explained[] = [];
          for (let i = 0; i < runs; i++) {
            await c.query('BEGIN');
            try {
              const r = await c.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE probe(${args})`);
              got.push((r.rows[0]['QUERY PLAN'] as Explained[])[0]);
            } finally {
              await c.query('ROLLBACK');
            }
          }
          const last = got[got.length - 1];
          return { planMs: median(got.map((x) => x['Planning Time'])), execMs: median(got.map((x) => x['Execution Time'])), ...scans(last.Plan) };
        };
        out.push({ sql: shape(s.sql), perRound: perSendOf(s.n), custom: await measure('force_custom_plan'), generic: await measure('force_generic_plan') });
      } catch (err) {
        out.push({ sql: shape(s.sql), perRound: perSendOf(s.n), error: (err as Error).message });
      }
    }
  } finally {
    await c.end();
  }
  return out;
}
