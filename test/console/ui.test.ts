// The console page in a real browser (Debian's chromium driven by playwright-core) against a real
// metarelay on anvil: what an operator does, end to end, with screenshots of the main screens.
import type { Browser, Page } from 'playwright-core';
import { encodeFunctionData, type Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20, startRelayerEnv, type RelayerEnv } from '../support/relayer-env.ts';
import { newSigner, signedBundle, walletFor } from '../support/sequence-wallet.ts';
import { startRawServer, type RawServer } from '../support/token-chain.ts';
import { hostCollection } from '../support/collections.ts';
import { solidPng } from '../support/media.ts';
import { WIDE, launchBrowser, loadedWidth, shot as shotOf } from './browser.ts';

let env: RelayerEnv;
let browser: Browser;
let page: Page;
let nft: Address;
let logos: RawServer;

beforeAll(async () => {
  env = await startRelayerEnv();
  const logo = await solidPng(200, 200, '#cc5500');
  logos = await startRawServer((_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(logo));
  [nft] = await env.chain.deploy([{ contract: 'DevERC721OnChain' }]);
  await env.chain.send([{ address: nft, contract: 'DevERC721OnChain', functionName: 'mint', args: [newSigner().address, 1n] }]);
  browser = await launchBrowser();
  page = await browser.newPage({ viewport: WIDE });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await env?.close();
  await logos?.stop();
});

const shot = (name: string) => shotOf(page, name);

/** A console API call as a script makes it (the admin token as a bearer). */
async function admin(method: string, body: unknown) {
  const r = await fetch(`${env.baseUrl}/rpc/Console/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${env.adminToken}` },
    body: JSON.stringify(body),
  });
  expect(r.status).toBe(200);
  return r.json();
}

const dbOne = async <T>(sql: string, args: unknown[]) => (await env.services.db.query<T>(sql, args)).rows[0];

const metadata = (key: string) =>
  fetch(`${env.baseUrl}/rpc/Metadata/GetTokenMetadata`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-access-key': key },
    body: JSON.stringify({ chainID: String(env.chainId), contractAddress: nft, tokenIDs: ['1'] }),
  });

async function relaySponsored(key: string): Promise<string> {
  const s = newSigner();
  const wallet = walletFor(s.address);
  await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [wallet.address, 100n] }]);
  const data = encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [newSigner().address, 40n] });
  const b = await signedBundle({ signerKey: s.privateKey, wallet, chainId: env.chainId, txs: [{ to: env.token, data }], deployed: false });
  const sent = await env.call('SendMetaTxn', { call: { walletAddress: wallet.address, contract: b.entrypoint, input: b.input } }, { 'x-access-key': key });
  expect(sent.status, JSON.stringify(sent.body)).toBe(200);
  for (let i = 0; i < 40; i++) {
    const r = await env.call('GetMetaTxnReceipt', { metaTxID: b.id });
    if (r.body.receipt.status === 'SUCCEEDED') return sent.body.txnHash as string;
  }
  throw new Error('the sponsored meta-transaction did not succeed');
}

describe('console page', () => {
  it('signs in, creates a project and a key, sponsors a contract, shows the relayed meta-transaction, and revokes the key', async () => {
    await page.goto(`${env.baseUrl}/console/`);
    await page.getByTestId('admin-token').waitFor();
    await shot('sign-in');

    await page.getByTestId('admin-token').fill('not the token');
    await page.getByTestId('sign-in').click();
    await expect.poll(() => page.getByTestId('error').textContent()).toMatch(/Unauthorized/);

    await page.getByTestId('admin-token').fill(env.adminToken);
    await page.getByTestId('sign-in').click();
    await page.getByTestId('nav-projects').waitFor();
    // The session is an HttpOnly cookie: the page's JavaScript cannot read it, and no secret is in the URL.
    expect(await page.evaluate(() => document.cookie)).not.toContain('mr_console');
    expect(page.url()).not.toContain(env.adminToken);

    const name = `ui-${Math.random().toString(36).slice(2, 8)}`;
    await page.getByTestId('project-name').fill(name);
    await page.getByTestId('create-project').click();
    await expect.poll(() => page.getByTestId('project-title').textContent()).toContain(name);
    const projectId = Number(/#\/projects\/(\d+)/.exec(page.url())![1]);

    await page.getByTestId('key-label').fill('browser test');
    await page.getByTestId('create-key').click();
    const key = (await page.getByTestId('new-key').textContent())!.trim();
    expect(key).toMatch(/^mr_/);
    await shot('access-keys');

    const md = await metadata(key);
    expect(md.status).toBe(200);
    const body = await md.json();
    expect(body.tokenMetadata[0]).toMatchObject({ tokenId: '1', name: 'OnChain #1' });

    await page.getByTestId('tab-sponsors').click();
    await page.getByTestId('sponsor-kind').selectOption('CONTRACT');
    await page.getByTestId('sponsor-address').fill(env.token);
    await page.getByTestId('add-sponsor').click();
    await expect.poll(() => page.getByTestId('sponsors').textContent()).toContain('CONTRACT');
    await page.getByTestId('check-wallet').fill(newSigner().address);
    await page.getByTestId('check-target').fill(env.token);
    await page.getByTestId('check').click();
    await expect.poll(() => page.getByTestId('check-result').textContent()).toMatch(/^Sponsored: covered by CONTRACT/);
    await shot('sponsorship');

    // The rule's policy and approval webhook are edited in place; the token never comes back to the page.
    const sponsors = page.getByTestId('sponsors');
    await sponsors.getByRole('button', { name: 'Edit' }).first().click();
    // Caps are typed in native units and show the exact wei (and, with a feed, dollars) as they are typed.
    await page.getByTestId('edit-txnCap').fill('1.5');
    expect(await page.getByTestId('edit-txnCap-hint').textContent()).toContain('= 1,500,000,000,000,000,000 wei');
    await page.getByTestId('edit-txnCap').fill('1.5x');
    expect(await page.getByTestId('edit-txnCap-hint').textContent()).toContain('is not an amount');
    await page.getByTestId('edit-txnCap').fill('1');
    await page.getByTestId('edit-webhookUrl').fill('https://approve.example.com/hook');
    await page.getByTestId('edit-webhookAuthToken').fill('ui-secret-token');
    await page.getByTestId('save-sponsor').click();
    await expect.poll(() => sponsors.textContent()).toContain('approve.example.com');
    expect(await sponsors.textContent()).toContain('token ••••••••');
    expect(await sponsors.textContent()).toContain('txn ≤ 1 ETH');
    expect(await sponsors.locator('[data-wei="1000000000000000000"]').getAttribute('title')).toContain('1000000000000000000 wei');
    const rule = (await admin('ListGasSponsors', { projectId })).gasSponsors[0];
    expect(rule.txnCapWei).toBe('1000000000000000000');
    expect(await page.content()).not.toContain('ui-secret-token');
    await shot('sponsorship-policy');
    // Removing a rule asks first, in red; Cancel leaves the rule in place.
    await sponsors.getByRole('button', { name: 'Remove' }).first().click();
    await sponsors.getByRole('alertdialog').waitFor();
    await sponsors.getByRole('button', { name: 'Cancel' }).click();
    expect(await sponsors.getByRole('alertdialog').count()).toBe(0);
    expect((await admin('ListGasSponsors', { projectId })).gasSponsors).toHaveLength(1);
    // Removing the webhook again (this test's relay below has no webhook to ask).
    await sponsors.getByRole('button', { name: 'Edit' }).first().click();
    await page.getByTestId('edit-webhookUrl').fill('');
    await page.getByTestId('edit-clearToken').check();
    await page.getByTestId('save-sponsor').click();
    await expect.poll(() => sponsors.textContent()).not.toContain('approve.example.com');
    expect(await sponsors.textContent()).not.toContain('••••••••');

    const metaTxnId = await relaySponsored(key);
    await page.getByTestId('tab-activity').click();
    const row = page.getByTestId(`tx-${metaTxnId}`);
    await row.waitFor();
    expect(await row.getByTestId('tx-status').textContent()).toBe('SUCCEEDED');
    // The cost in native units and dollars, the exact wei in its title: what the database holds.
    const mined = await dbOne<{ cost: string }>('SELECT (gas_used * gas_price)::text AS cost FROM meta_txns WHERE id = $1', [metaTxnId]);
    await expect.poll(() => row.getByTestId('tx-cost').locator('.amount').getAttribute('data-wei')).toBe(mined.cost);
    expect(await row.getByTestId('tx-cost').textContent()).toMatch(/^0\.\d+ ETH/);
    expect(await page.getByTestId('activity-count').textContent()).toBe('1–1 of 1 meta-transactions');
    await page.getByTestId('filter-status').selectOption('FAILED');
    await expect.poll(() => page.getByTestId('activity-count').textContent()).toBe('No meta-transactions');
    await page.getByTestId('filter-status').selectOption('');
    await row.waitFor();
    await shot('activity');
    await row.getByRole('link').click();
    await expect.poll(() => page.getByTestId('detail-status').textContent()).toBe('SUCCEEDED');
    await expect.poll(() => page.getByTestId('attempts').locator('tbody tr').count()).toBeGreaterThan(0);
    expect(await page.getByTestId('receipt').textContent()).toContain('transactionHash');
    await shot('meta-transaction');

    // The Balance tab: the operator funds the project with 1 ETH, a sponsored relay is debited its actual
    // cost, and the page shows what the database holds (balance, ledger, a bar for today's spend).
    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/balance`);
    const panel = page.locator('[data-testid^="balance-"]').first();
    await panel.waitFor();
    // Before any balance, the relay above was paid by the operator: the page says so, with how much, and
    // the ledger's last column is filled with that running total rather than left empty.
    const paid = await dbOne<{ paid: string }>('SELECT (-SUM(amount_wei))::text AS paid FROM gas_tank_ledger WHERE project_id = $1 AND tank_id IS NULL', [projectId]);
    expect(BigInt(paid.paid)).toBeGreaterThan(0n);
    await expect.poll(() => panel.getByTestId('operator-paid').getAttribute('data-wei')).toBe(paid.paid);
    expect(await panel.getByTestId('no-tank').textContent()).toContain('the operator pays');
    expect(await panel.getByTestId('balance-after').first().textContent()).toMatch(/^operator paid \d/);
    await shot('project-balance-none');
    await panel.getByTestId('adjust-amount').fill('1');
    expect(await panel.getByTestId('adjust-hint').textContent()).toContain('= 1 ETH = 1,000,000,000,000,000,000 wei');
    await panel.getByTestId('adjust-balance').click();
    await expect.poll(() => panel.getByTestId('balance-amount').getAttribute('data-wei')).toBe(String(10n ** 18n));
    const debited = await relaySponsored(key);
    await page.reload();
    await panel.waitFor();
    const tank = (await env.services.db.query<{ balance_wei: string }>('SELECT balance_wei::text AS balance_wei FROM gas_tanks WHERE project_id = $1 AND chain_id = $2', [projectId, env.chainId]))
      .rows[0];
    const debit = (await env.services.db.query<{ txn_hash: string }>(`SELECT txn_hash FROM gas_tank_ledger WHERE project_id = $1 AND kind = 'debit' AND meta_txn_id = $2`, [projectId, debited]))
      .rows[0];
    const receipt = await env.public.getTransactionReceipt({ hash: `0x${debit.txn_hash.replace(/^0x/, '')}` as `0x${string}` });
    expect(BigInt(tank.balance_wei)).toBe(10n ** 18n - receipt.gasUsed * receipt.effectiveGasPrice);
    await expect.poll(() => panel.getByTestId('balance-amount').getAttribute('data-wei')).toBe(tank.balance_wei);
    expect(await panel.getByTestId('balance-amount').textContent()).toMatch(/^0\.9\d* ETH/);
    const ledger = panel.getByTestId('ledger');
    await expect.poll(() => ledger.locator('tbody tr').filter({ hasText: 'debit' }).count()).toBeGreaterThan(0);
    expect(await ledger.locator('tbody tr').filter({ hasText: 'adjustment' }).count()).toBe(1);
    // The newest entry's balance after is the tank's balance.
    expect(await ledger.getByTestId('balance-after').first().locator('.amount').getAttribute('data-wei')).toBe(tank.balance_wei);
    // The chart's bars are what the ledger holds: 30 days, today's bar the day's debits less reversals, in wei.
    const chart = panel.getByTestId('spend-chart');
    expect(await chart.locator('rect').count()).toBe(30);
    const spentToday = await dbOne<{ day: string; wei: string }>(
      `SELECT to_char((created_at AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS day, (-SUM(amount_wei))::text AS wei FROM gas_tank_ledger
        WHERE project_id = $1 AND chain_id = $2 AND kind IN ('debit', 'reversal') GROUP BY 1 ORDER BY 1 DESC LIMIT 1`,
      [projectId, env.chainId],
    );
    expect(await chart.locator(`rect[data-key="${spentToday.day}"]`).getAttribute('data-value')).toBe(spentToday.wei);
    expect(await chart.locator(`rect[data-key="${spentToday.day}"] title`).textContent()).toMatch(/ETH, 2 meta-transactions$/);
    expect(await chart.locator('text').first().textContent()).toBe('0');
    await shot('project-balance');

    // The Overview tab: its charts are the database's roll-ups, and the roll-ups are the raw rows.
    await env.services.auth.flush();
    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/overview`);
    const overview = page.getByTestId('overview');
    await overview.waitFor();
    const raw = await dbOne<{ day: string; n: string; gas: string; cost: string }>(
      `SELECT to_char((queued_at AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS day, COUNT(*)::text AS n, SUM(gas_used)::text AS gas, SUM(gas_used::numeric * gas_price)::text AS cost
         FROM meta_txns WHERE project_id = $1 AND status = 'SUCCEEDED' GROUP BY 1 ORDER BY 1 DESC LIMIT 1`,
      [projectId],
    );
    expect(raw.n).toBe('2');
    const txChart = overview.getByTestId('metatxns-chart');
    expect(await txChart.locator(`rect[data-key="${raw.day}"][data-series="SUCCEEDED"]`).getAttribute('data-value')).toBe(raw.n);
    expect(await txChart.locator(`rect[data-key="${raw.day}"][data-series="SUCCEEDED"] title`).textContent()).toBe(`${raw.day}: succeeded 2`);
    expect(await overview.getByTestId('gas-chart').locator(`rect[data-key="${raw.day}"]`).getAttribute('data-value')).toBe(raw.gas);
    expect(await overview.getByTestId('usage-spend-chart').locator(`rect[data-key="${raw.day}"]`).getAttribute('data-value')).toBe(raw.cost);
    expect(await overview.getByTestId('success-chart').locator(`rect[data-key="${raw.day}"]`).getAttribute('data-value')).toBe('100');
    // Requests: today's metadata segment is what the flush rolled up, and every hour adds up to the key's count.
    const reqs = await dbOne<{ rolled: string; total: string }>(
      `SELECT (SELECT SUM(u.requests) FROM key_usage_hourly u JOIN access_keys k ON k.id = u.key_id WHERE k.project_id = $1 AND u.family = 'metadata'
                 AND to_char(u.hour AT TIME ZONE 'UTC', 'YYYY-MM-DD') = $2)::text AS rolled,
              (SELECT SUM(request_count) FROM access_keys WHERE project_id = $1)::text AS total`,
      [projectId, raw.day],
    );
    expect(Number(reqs.rolled)).toBeGreaterThan(0);
    expect(await overview.getByTestId('requests-chart').locator(`rect[data-key="${raw.day}"][data-series="metadata"]`).getAttribute('data-value')).toBe(reqs.rolled);
    expect(await overview.getByTestId('total-requests').textContent()).toBe(Number(reqs.total).toLocaleString('en-US'));
    expect(await overview.getByTestId('total-spend').getAttribute('data-wei')).toBe(raw.cost);
    await shot('project-overview');
    await page.goto(`${env.baseUrl}/console/#/projects`);
    await expect.poll(() => page.getByTestId(`totals-metatxns-${projectId}`).textContent()).toBe('2');
    expect(await page.getByTestId(`totals-requests-${projectId}`).textContent()).toBe(Number(reqs.total).toLocaleString('en-US'));
    await shot('projects');

    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/keys`);
    const keyRow = page.getByTestId('keys').locator('tbody tr').filter({ hasText: 'browser test' });
    // Revoking asks first; Cancel leaves the key working.
    await keyRow.getByRole('button', { name: 'Revoke' }).click();
    await keyRow.getByRole('alertdialog').waitFor();
    await shot('revoke-confirm');
    await keyRow.getByRole('button', { name: 'Cancel' }).click();
    expect(await keyRow.getByRole('alertdialog').count()).toBe(0);
    expect(await keyRow.textContent()).toContain('live');
    expect((await metadata(key)).status).toBe(200);
    await keyRow.getByRole('button', { name: 'Revoke' }).click();
    await keyRow.getByRole('button', { name: 'Revoke key' }).click();
    await expect.poll(() => keyRow.textContent()).toContain('revoked');
    const refused = await metadata(key);
    expect(refused.status).toBe(401);
    expect((await refused.json()).error).toBe('Unauthorized');

    await page.getByTestId('nav-tokens').click();
    await page.getByTestId('lookup-network').fill(String(env.chainId));
    await page.getByTestId('lookup-contract').fill(nft);
    await page.getByTestId('lookup-token').fill('1');
    await page.getByTestId('lookup').click();
    // A token page that looks like a token: its name and its picture on the FIRST lookup (the media
    // pipeline fetches and rasterises the on-chain SVG while a placeholder says so), the raw document
    // and the trace folded away, and no base64 wall in sight.
    await expect.poll(() => page.getByTestId('token-name').textContent()).toBe('OnChain #1');
    expect(await page.getByTestId('lookup-metadata').textContent()).toContain('OnChain #1');
    expect(await page.getByTestId('lookup-trace').textContent()).toMatch(/tokenURI|data:/);
    await expect.poll(() => page.getByTestId('media-image').evaluate(loadedWidth), { timeout: 30_000 }).toBe(256);
    // The placeholder goes at the picture's load event, a render after `complete` (seen still there once in CI).
    await expect.poll(() => page.getByTestId('media-image-pending').count(), { timeout: 10_000 }).toBe(0);
    // biome-ignore lint/performance/useDomNodeTextContent: what is on screen is the point (the folded raw JSON holds the base64)
    expect(await page.locator('main').innerText()).not.toMatch(/base64,[A-Za-z0-9+/=]{60}/);
    expect(await page.getByTestId('lookup-metadata').isVisible()).toBe(false);
    // Its attributes as chips; the raw JSON behind a toggle that opens.
    expect(await page.getByTestId('token-attributes').textContent()).toMatch(/^Hue \d+/);
    await shot('token-lookup');
    await page.getByText('Raw JSON').click();
    expect(await page.getByTestId('lookup-metadata').isVisible()).toBe(true);
    expect(await page.getByTestId('lookup-metadata').textContent()).toContain('"trait_type": "Hue"');
    await page.getByText('Raw JSON').click();
    await page.getByTestId('nav-tasks').click();
    await page.getByTestId('tasks').waitFor();
    await shot('tasks');

    await page.getByTestId('nav-health').click();
    await page.getByTestId(`health-${env.chain.chainConfig.name}`).getByTestId('head').waitFor();
    expect(await page.getByTestId('sender-state-0').textContent()).toBe('running');
    await page.getByTestId('sender-toggle-0').click();
    await expect.poll(() => page.getByTestId('sender-state-0').textContent()).toMatch(/^stopped since/);
    await shot('health');
    await page.getByTestId('sender-toggle-0').click();
    await expect.poll(() => page.getByTestId('sender-state-0').textContent()).toBe('running');
    await page.getByTestId('nav-fees').click();
    await page.getByTestId(`fees-${env.chain.chainConfig.name}`).waitFor();
    expect(await page.getByTestId(`fees-${env.chain.chainConfig.name}`).textContent()).toContain('FUSD');
    await shot('fee-tokens');

    // A contract's logo, cached by the media pipeline, shows in the token directory from this origin
    // (the page's CSP would block the source's own URL).
    const token = env.token.toLowerCase() as Address;
    await env.services.contractStore.upsertLayers(env.chainId, [{ address: token, override: { logoURI: `${logos.url}/logo.png` } }]);
    const added = await page.evaluate(async (a) => (await fetch('/rpc/Console/AddToDirectory', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(a) })).status, {
      chainID: String(env.chainId),
      contractAddress: token,
    });
    expect(added).toBe(200);
    // Its logo shows on the first visit: put through the media pipeline by the page, a placeholder meanwhile.
    await page.getByTestId('nav-directory').click();
    await page.getByTestId('directory').waitFor();
    await expect.poll(() => page.getByTestId(`logo-${token}`).evaluate(loadedWidth), { timeout: 30_000 }).toBe(64);
    // Removing a directory entry asks first; Cancel leaves it listed.
    const entry = page
      .getByTestId('directory')
      .locator('tr')
      .filter({ has: page.getByTestId(`logo-${token}`) });
    await entry.getByRole('button', { name: 'Remove' }).click();
    await entry.getByRole('button', { name: 'Cancel' }).click();
    expect(await page.getByTestId(`logo-${token}`).count()).toBe(1);
    await shot('directory');

    await page.getByTestId('sign-out').click();
    await page.getByTestId('admin-token').waitFor();
    // Signed out means signed out for the API too, not just the page.
    const after = await page.evaluate(async () => (await fetch('/rpc/Console/ListProjects', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status);
    expect(after).toBe(401);
  });

  it("shows a project's collections and, on the first visit, its tokens' pictures", async () => {
    // A project hosts a collection as the dev sample does: two pictures uploaded, one linked from the
    // document; an ERC-721 whose base URI points at the collection, tokens minted, contract linked.
    const projectId = (await admin('CreateProject', { name: `gallery-${Math.random().toString(36).slice(2, 8)}` })).project.id as number;
    const key = (await admin('CreateAccessKey', { projectId, label: 'collections', kind: 'secret' })).accessKey as string;
    const { client, collection } = await hostCollection(env.baseUrl, key, projectId, 'Gallery', [
      { tokenId: '1', name: 'Ruby', picture: { bytes: await solidPng(400, 400, '#c0392b'), filename: 'ruby.png' } },
      { tokenId: '2', name: 'Emerald', picture: { bytes: await solidPng(300, 400, '#27ae60'), filename: 'emerald.png' } },
      { tokenId: '3', name: 'Amber', image: `${logos.url}/amber.png` },
    ]);
    await hostCollection(env.baseUrl, key, projectId, 'Drafts', [{ tokenId: '1', name: 'Sketch' }], false);
    const uris = collection.baseURIs!;
    const [gallery] = await env.chain.deploy([{ contract: 'DevERC721', args: ['Gallery', 'GAL', uris.tokenMetadataURI, uris.contractMetadataURI] }]);
    const contract = gallery!.toLowerCase() as Address;
    await env.chain.send([1n, 2n, 3n].map((id) => ({ address: contract, contract: 'DevERC721', functionName: 'mint', args: [newSigner().address, id] })));
    await client.createContractCollection({ contractCollection: { chainId: env.chainId, contractAddress: contract, collectionId: collection.id } } as never);

    // A page of its own: this test signs in whatever the test before it left (a failure there left a session).
    page = await browser.newPage({ viewport: WIDE });
    await page.goto(`${env.baseUrl}/console/`);
    await page.getByTestId('admin-token').fill(env.adminToken);
    await page.getByTestId('sign-in').click();
    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}`);
    await page.getByTestId('tab-collections').click();
    const row = page.getByTestId(`collection-${collection.id}`);
    await row.waitFor();
    expect(await row.getByRole('link').textContent()).toBe('Gallery');
    expect(await row.getByTestId('collection-state').textContent()).toBe('published');
    expect(await row.getByTestId('collection-token-count').textContent()).toBe('3');
    expect(await row.getByTestId('collection-contracts').textContent()).toBe(`${env.chain.chainConfig.name} ${contract.slice(0, 10)}…${contract.slice(-4)}`);
    const drafts = page.getByTestId('collections').locator('tbody tr').filter({ hasText: 'Drafts' });
    expect(await drafts.getByTestId('collection-state').textContent()).toBe('unpublished');
    expect(await page.getByTestId('collections-count').textContent()).toBe('1–2 of 2 collections');
    await shot('collections');

    await row.getByRole('link').click();
    await expect.poll(() => page.getByTestId('collection-name').textContent()).toContain('Gallery');
    const loaded = (id: string) => page.getByTestId(`token-image-${id}`).evaluate((img) => ((img as HTMLImageElement).complete ? (img as HTMLImageElement).naturalWidth : 0));
    // The uploads' 256 px renditions, made on this first request; the linked picture fetched by the media pipeline now.
    await expect.poll(() => loaded('1'), { timeout: 30_000 }).toBe(256);
    await expect.poll(() => loaded('2'), { timeout: 30_000 }).toBeGreaterThan(0);
    await expect.poll(() => loaded('3'), { timeout: 30_000 }).toBeGreaterThan(0);
    expect(await page.getByTestId('token-1').getByTestId('token-tile-name').textContent()).toBe('Ruby');
    expect(await page.getByTestId('collection-tokens-count').textContent()).toBe('1–3 of 3 tokens');
    // The placeholder goes at the picture's load event, a render after `complete` (seen still there once at load 9).
    await expect.poll(() => page.locator('[data-testid$="-pending"]').count(), { timeout: 10_000 }).toBe(0);
    await shot('collection-tokens');
  });
});
