// Push from the relayer on a real anvil: metatxn.status webhooks, and the sponsorship approval webhook
// judged on chain (nobody's gas spent, no token moved when it refuses) and in the stored rows.
import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, type Address } from 'viem';
import { verifySignature } from '../src/events/signature.ts';
import { SENDER_KEYS, erc20, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { newSigner, signedBundle, walletFor } from './support/sequence-wallet.ts';
import { eventually, startRawServer, type RawServer } from './support/token-chain.ts';
import { privateKeyToAddress } from 'viem/accounts';

let env: RelayerEnv;
let hooks: RawServer;
let approver: RawServer;
const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];
const asked: { headers: http.IncomingHttpHeaders; body: any }[] = [];
/** What the approval webhook does next. */
let mode: 'yes' | 'no' | 'hang' | 'string-true' | 'html' | 'check-token' = 'yes';
const TOKEN = 'approval-token-7f3a';

const admin = () => ({ authorization: `Bearer ${env.adminToken}` });
const key = () => ({ 'x-access-key': env.accessKey });

beforeAll(async () => {
  env = await startRelayerEnv({ webhooks: { approvalDeadlineMs: 2000, pollMs: 50 } });
  hooks = await startRawServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  approver = await startRawServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      asked.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      const json = (status: number, body: string) => res.writeHead(status, { 'content-type': 'application/json' }).end(body);
      if (mode === 'yes') return json(200, '{"sponsor": true}');
      if (mode === 'no') return json(200, '{"sponsor": false}');
      if (mode === 'string-true') return json(200, '{"sponsor": "true"}');
      if (mode === 'html') return res.writeHead(200, { 'content-type': 'text/html' }).end('<b>ok</b>');
      if (mode === 'check-token') return req.headers.authorization === `Bearer ${TOKEN}` ? json(200, '{"sponsor": true}') : json(401, '{"error":"bad token"}');
      // 'hang': never answers.
    });
  });
}, 120_000);
afterAll(async () => {
  await env?.close();
  await hooks?.stop();
  await approver?.stop();
});

const transfer = (to: Address, amount: bigint) => ({ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] }) });
const balance = (owner: Address) => env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [owner] });
const senders = SENDER_KEYS.map((k) => privateKeyToAddress(k));
const senderBalances = () => Promise.all(senders.map((a) => env.public.getBalance({ address: a })));

async function bundleFor(amount: bigint) {
  const s = newSigner();
  const wallet = walletFor(s.address);
  const to = newSigner().address;
  await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [wallet.address, 1_000n] }]);
  const b = await signedBundle({ signerKey: s.privateKey, wallet, chainId: env.chainId, txs: [transfer(to, amount)], deployed: false });
  return { b, wallet: wallet.address, to };
}

const send = (b: { entrypoint: Address; input: `0x${string}` }, wallet: Address) => env.call('SendMetaTxn', { call: { walletAddress: wallet, contract: b.entrypoint, input: b.input } }, key());

let ruleId: number;

describe('sponsorship approval webhook', () => {
  it('stores and returns webhookUrl and webhookAuthToken, and refuses a non-http URL', async () => {
    const bad = await env.call('AddGasSponsor', { projectId: env.project.id, address: env.token, kind: 'CONTRACT', webhookUrl: 'file:///etc/passwd' }, admin());
    expect(bad.status).toBe(400);
    const r = await env.call('AddGasSponsor', { projectId: env.project.id, address: env.token, kind: 'CONTRACT', webhookUrl: `${approver.url}/approve`, webhookAuthToken: TOKEN }, admin());
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.gasSponsor).toMatchObject({ webhookUrl: `${approver.url}/approve`, webhookAuthToken: TOKEN });
    ruleId = r.body.gasSponsor.id;
    const got = await env.call('GetGasSponsor', { projectId: env.project.id, id: ruleId }, admin());
    expect(got.body.gasSponsor).toMatchObject({ webhookUrl: `${approver.url}/approve`, webhookAuthToken: TOKEN });
  });

  it('sponsors when the webhook answers {"sponsor": true} to the bearer token, and pushes QUEUED → SENT → SUCCEEDED signed', async () => {
    const created = await fetchConsole('CreateWebhook', { projectId: env.project.id, url: `${hooks.url}/events`, events: ['metatxn.status'] });
    const secret = created.secret as string;
    mode = 'check-token';
    const { b, wallet, to } = await bundleFor(250n);
    const fee = await env.call('FeeOptions', { wallet, to: b.entrypoint, data: b.input }, key());
    expect(fee.body.sponsored).toBe(true);
    const sent = await send(b, wallet);
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const req = asked.at(-1)!;
    expect(req.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(req.body).toMatchObject({ type: 'sponsorship.approval', stage: 'send', chainId: env.chainId, rule: { id: ruleId, kind: 'CONTRACT' }, wallet });
    expect(req.body.calls.some((c: { to: string }) => c.to.toLowerCase() === env.token.toLowerCase())).toBe(true);
    expect(BigInt(req.body.estimatedCostWei)).toBe(BigInt(req.body.estimatedGas) * BigInt(req.body.gasPrice));
    const id = b.id.slice(2).toLowerCase();
    const events = await eventually(
      async () => received.map((r) => JSON.parse(r.body)).filter((e) => e.data.metaTxnId === id),
      (e) => expect(e.at(-1)?.data.status).toBe('SUCCEEDED'),
      20_000,
    );
    expect(events.map((e) => e.data.status)).toEqual(['QUEUED', 'SENT', 'SUCCEEDED']);
    for (const r of received.filter((x) => JSON.parse(x.body).data.metaTxnId === id)) {
      expect(verifySignature(secret, String(r.headers['metarelay-signature']), r.body)).toBe(true);
    }
    const receipt = await env.call('GetMetaTxnReceipt', { metaTxID: b.id });
    expect(events.at(-1).data.receipt).toEqual(receipt.body.receipt);
    expect(await balance(to)).toBe(250n);
  }, 60_000);

  for (const [m, why] of [
    ['no', /did not approve it \(its answer was not \{"sponsor": true\}\)/],
    ['string-true', /its answer was not/],
    ['html', /its answer was not/],
    ['hang', /no answer within 2000 ms/],
    ['wrong-token', /answered HTTP 401/],
  ] as const) {
    it(`does not sponsor when the webhook ${m === 'hang' ? 'does not answer in time' : `answers ${m}`}: nothing is queued, no gas spent, no token moved`, async () => {
      if (m === 'wrong-token') {
        mode = 'check-token';
        const u = await env.call('UpdateGasSponsor', { projectId: env.project.id, id: ruleId, webhookAuthToken: 'not-the-token' }, admin());
        expect(u.body.gasSponsor.webhookAuthToken).toBe('not-the-token');
      } else mode = m;
      const { b, wallet, to } = await bundleFor(100n);
      const before = await senderBalances();
      const n = asked.length;
      const fee = await env.call('FeeOptions', { wallet, to: b.entrypoint, data: b.input }, key());
      expect(fee.status).toBe(200);
      expect(fee.body.sponsored).toBe(false);
      const sent = await send(b, wallet);
      expect(sent.status).toBe(402);
      expect(sent.body.cause).toMatch(why);
      expect(asked.length).toBe(n + 2);
      const rows = await env.services.db.query('SELECT 1 FROM meta_txns WHERE id = $1', [b.id.slice(2).toLowerCase()]);
      expect(rows.rowCount).toBe(0);
      await new Promise((r) => setTimeout(r, 300));
      expect(await senderBalances()).toEqual(before);
      expect(await balance(to)).toBe(0n);
      if (m === 'wrong-token') await env.call('UpdateGasSponsor', { projectId: env.project.id, id: ruleId, webhookAuthToken: TOKEN }, admin());
    }, 30_000);
  }
});

async function fetchConsole(method: string, body: unknown) {
  const r = await fetch(`${env.baseUrl}/rpc/Console/${method}`, { method: 'POST', headers: { 'content-type': 'application/json', ...admin() }, body: JSON.stringify(body) });
  const json = await r.json();
  if (r.status !== 200) throw new Error(`${method}: ${JSON.stringify(json)}`);
  return json;
}
