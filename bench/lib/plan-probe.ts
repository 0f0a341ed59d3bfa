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

/**
 * Relations read by a sequential scan, relations read through an index by no key or by the chain alone
 * (what the "already known" look-up's generic plan once did), and the shared buffers the plan touched.
 */
function scans(plan: Record<string, unknown>) {
  const seq = new Set<string>();
  const unkeyed = new Set<string>();
  const walk = (node: Record<string, unknown>) => {
    const rel = node['Relation Name'] as string | undefined;
    if (node['Node Type'] === 'Seq Scan') seq.add(String(rel));
    else if (rel && /Index/.test(String(node['Node Type']))) {
      const cond = String(node['Index Cond'] ?? '');
      if (!cond || /^\(?\(?chain_id = \$\d+\)?\)?$/.test(cond)) unkeyed.add(`${rel} (${node['Index Name']})`);
    }
    for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? []) walk(child);
  };
  walk(plan);
  return { seqScans: [...seq], unkeyedScans: [...unkeyed], sharedBuffers: Number(plan['Shared Hit Blocks'] ?? 0) + Number(plan['Shared Read Blocks'] ?? 0) };
}

/** The plan in one line per node: type, relation and index, rows and loops, buffers. */
function outline(plan: Record<string, unknown>): string[] {
  const lines: string[] = [];
  const walk = (node: Record<string, unknown>, depth: number) => {
    const rel = `${node['Relation Name'] ? ` ${node['Relation Name']}` : ''}${node['Index Name'] ? `/${node['Index Name']}` : ''}${node['Index Cond'] ? ` [${node['Index Cond']}]` : ''}${node['Recheck Cond'] ? ` [${node['Recheck Cond']}]` : ''}`;
    const bufs = Number(node['Shared Hit Blocks'] ?? 0) + Number(node['Shared Read Blocks'] ?? 0);
    lines.push(`${'  '.repeat(depth)}${node['Node Type']}${rel} rows=${node['Actual Rows']} loops=${node['Actual Loops']} buf=${bufs}`);
    for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? []) walk(child, depth + 1);
  };
  walk(plan, 0);
  return lines;
}

/**
 * BENCH_PROBE_GROW=N: before probing, N finished meta-transactions of 500 other wallets (and their
 * bundles) join the history of the chain the round used, and the tables are analysed: plans as a relayer with a past sees them.
 */
async function grow(c: pg.Client, n: number) {
  await c.query(
    `INSERT INTO meta_txns (chain_id, id, wallet, entrypoint, input, status, gas_limit, gas_estimated, key_id, client_ip)
     SELECT m.chain_id, '0xgrown' || g, '0x' || substr(md5((g % 500)::text), 1, 40), m.entrypoint, '0x', 'SUCCEEDED', 1, 1, m.key_id, m.client_ip
       FROM (SELECT * FROM meta_txns WHERE chain_id = (SELECT chain_id FROM meta_txns GROUP BY 1 ORDER BY count(*) DESC LIMIT 1) LIMIT 1) m,
         generate_series(1, $1::int) g`,
    [n],
  );
  await c.query(
    `INSERT INTO meta_txn_bundles (chain_id, bundle_id, meta_txn_id, wallet, nonce_space, nonce, live)
     SELECT chain_id, 'b' || id, id, wallet, 0, row_number() OVER (PARTITION BY wallet ORDER BY id), false FROM meta_txns WHERE id LIKE '0xgrown%'`,
  );
  await c.query('ANALYZE');
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

export async function planProbe(url: string, samples: Sample[], perSendOf: (n: number) => number, opts: { runs?: number; grow?: number } = {}) {
  const runs = opts.runs ?? 7;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const out: unknown[] = [];
  try {
    if (opts.grow) await grow(c, opts.grow);
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
          return { planMs: median(got.map((x) => x['Planning Time'])), execMs: median(got.map((x) => x['Execution Time'])), ...scans(last.Plan), plan: outline(last.Plan) };
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
