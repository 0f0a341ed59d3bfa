// The project overview's roll-ups against the raw rows after real traffic: keyed requests of each
// method family and sponsored meta-transactions relayed on anvil.
import { describe, expect, it } from 'vitest';
import { encodeFunctionData } from 'viem';
import { erc20, type RelayerEnv } from '../support/relayer-env.ts';
import { newSigner, signedBundle, walletFor } from '../support/sequence-wallet.ts';
import { rpc } from '../support/service.ts';
import { bearer, type Call } from './support.ts';
import { consoleRelayerEnv } from '../support/console-env.ts';

let env: RelayerEnv;
let call: Call;
const admin = async (method: string, body: unknown = {}) => {
  const r = await call(method, body, bearer(env.adminToken));
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
};

consoleRelayerEnv((e, c) => {
  env = e;
  call = c;
});

/** Sends a sponsored transfer with the key; its id. */
async function relay(key: string): Promise<string> {
  const s = newSigner();
  const wallet = walletFor(s.address);
  await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [wallet.address, 100n] }]);
  const data = encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [newSigner().address, 40n] });
  const b = await signedBundle({ signerKey: s.privateKey, wallet, chainId: env.chainId, txs: [{ to: env.token, data }], deployed: false });
  const sent = await env.call('SendMetaTxn', { call: { walletAddress: wallet.address, contract: b.entrypoint, input: b.input } }, { 'x-access-key': key });
  expect(sent.status, JSON.stringify(sent.body)).toBe(200);
  return b.id;
}

async function settled(id: string) {
  for (let i = 0; i < 40; i++) {
    const r = await env.call('GetMetaTxnReceipt', { metaTxID: id });
    if (r.body.receipt.status === 'SUCCEEDED') return;
  }
  throw new Error(`meta-transaction ${id} did not succeed`);
}

/** The raw rows' counts per status: what the roll-up must equal. */
async function rawByStatus(projectId: number) {
  const r = await env.services.db.query<{ status: string; n: string; gas: string; cost: string }>(
    `SELECT status, COUNT(*)::text AS n, COALESCE(SUM(gas_used), 0)::text AS gas, COALESCE(SUM(gas_used::numeric * gas_price), 0)::text AS cost
       FROM meta_txns WHERE project_id = $1 GROUP BY status ORDER BY status`,
    [projectId],
  );
  return r.rows.map((x) => ({ status: x.status, txns: Number(x.n), gasUsed: x.gas, costWei: x.cost }));
}

/** The answer's meta-transactions summed over days per status. */
function rolledByStatus(u: { metaTxns: Array<{ status: string; txns: number; gasUsed: string; costWei: string }> }) {
  const by = new Map<string, { status: string; txns: number; gasUsed: bigint; costWei: bigint }>();
  for (const m of u.metaTxns) {
    const t = by.get(m.status) ?? { status: m.status, txns: 0, gasUsed: 0n, costWei: 0n };
    by.set(m.status, { status: m.status, txns: t.txns + m.txns, gasUsed: t.gasUsed + BigInt(m.gasUsed), costWei: t.costWei + BigInt(m.costWei) });
  }
  return [...by.values()].sort((a, b) => a.status.localeCompare(b.status)).map((x) => ({ ...x, gasUsed: x.gasUsed.toString(), costWei: x.costWei.toString() }));
}

describe('console: project usage roll-ups', () => {
  it('counts requests per key and method family, and meta-transactions per status with gas and cost, equal to the raw rows', async () => {
    const p = (await admin('CreateProject', { name: `usage-${Math.random().toString(36).slice(2, 8)}` })).project;
    const [a, b] = [await admin('CreateAccessKey', { projectId: p.id, label: 'a' }), await admin('CreateAccessKey', { projectId: p.id, label: 'b' })];
    await admin('AddGasSponsor', { projectId: p.id, chainID: String(env.chainId), kind: 'CONTRACT', address: env.token });

    // Key a: 3 metadata calls; key b: 2 metadata calls, 2 relayed meta-transactions and their fee options.
    const md = (key: string) => rpc(env.app, '/rpc/Metadata/GetContractInfo', { chainID: String(env.chainId), contractAddress: env.token }, { 'x-access-key': key });
    for (let i = 0; i < 3; i++) expect((await md(a.accessKey)).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await md(b.accessKey)).status).toBe(200);
    const first = await relay(b.accessKey);
    // A view while the first is in flight: its later status must move it, not count it twice.
    await admin('ProjectUsage', { projectId: p.id });
    await settled(first);
    await settled(await relay(b.accessKey));
    await env.services.auth.flush();

    const u = await admin('ProjectUsage', { projectId: p.id, days: 7 });
    expect(u.days).toHaveLength(7);
    const today = u.days[6];
    const req = (keyId: number, family: string) => u.requests.find((r: any) => r.keyId === keyId && r.family === family && r.day === today)?.requests ?? 0;
    expect(req(a.key.id, 'metadata')).toBe(3);
    expect(req(b.key.id, 'metadata')).toBe(2);
    // SendMetaTxn twice; the receipts were asked without a key.
    expect(req(b.key.id, 'relayer')).toBe(2);
    expect(req(a.key.id, 'relayer')).toBe(0);
    // Each key's hours add up to its total request count.
    const counts = await env.services.db.query<{ id: string; n: string }>('SELECT id::text, request_count::text AS n FROM access_keys WHERE project_id = $1', [p.id]);
    for (const k of counts.rows) {
      const rolled = u.requests.filter((r: any) => r.keyId === Number(k.id)).reduce((n: number, r: any) => n + r.requests, 0);
      expect(rolled).toBe(Number(k.n));
    }

    const raw = await rawByStatus(p.id);
    expect(raw).toEqual([{ status: 'SUCCEEDED', txns: 2, gasUsed: expect.any(String), costWei: expect.any(String) }]);
    expect(BigInt(raw[0].costWei)).toBeGreaterThan(0n);
    expect(rolledByStatus(u)).toEqual(raw);
    expect(u.metaTxns.every((m: any) => m.day === today && m.chainId === env.chainId)).toBe(true);

    // The roll-up table itself holds the same, whatever the view does with it.
    const table = await env.services.db.query<{ n: string; cost: string }>('SELECT SUM(txns)::text AS n, SUM(cost_wei)::text AS cost FROM meta_txn_usage_hourly WHERE project_id = $1', [p.id]);
    expect(table.rows[0]).toEqual({ n: '2', cost: raw[0].costWei });

    // The project list's totals come from the same roll-ups.
    const listed = (await admin('ListProjects')).projects.find((x: any) => x.id === p.id);
    expect(listed.totals).toMatchObject({ requests: 7, metaTxns: 2, succeeded: 2, successRate: 1, spend: [{ chainId: env.chainId, costWei: raw[0].costWei }] });
  });

  it('refuses an unknown project', async () => {
    const r = await call('ProjectUsage', { projectId: 999_999 }, bearer(env.adminToken));
    expect(r.body.error).toBe('ProjectNotFound');
  });
});
