import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnvil, type AnvilHandle } from '../src/devchain/anvil.ts';
import { ANVIL_DEPLOYER_KEY } from '../src/devchain/samples.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { freePort } from './support/ports.ts';
import { drainUnderLoad } from './support/package-drain.ts';
import { appOf, cleanEnv, packedAndInstalled, sh, type InstalledApp } from './support/package.ts';

let anvil: AnvilHandle;
/** The tarball installed by the first test, for the drain under load. */
let installedApp: InstalledApp | undefined;
let testDb: TestDb;
beforeAll(async () => {
  anvil = await startAnvil({ blockTime: null });
  testDb = await createTestDb();
  if (TEST_DB === 'pglite') await testDb.db.close();
});
afterAll(async () => {
  installedApp?.remove();
  await anvil?.stop();
  await testDb?.drop().catch(() => undefined);
});

describe(`the npm package, installed with --omit=dev (${TEST_DB})`, () => {
  // The bound is a guard against hangs: npm pack (with the build) and the install took up to ~10 min on the loaded 2-core machine.
  it('holds the build and no tests, installs without dev tooling, and migrates and serves with plain node', { timeout: 900_000 }, async () => {
    // Packed and installed once per content of the sources (support/package.ts): the PostgreSQL half
    // of `npm test` checks the same tarball and install the PGlite half made.
    const pkg = await packedAndInstalled();
    const files = pkg.files;
    for (const f of [
      'bin/metarelay.mjs',
      'dist/cli/main.js',
      'dist/cli/main.js.map',
      'dist/store/migrations/0001_projects_and_keys.sql',
      'dist/console-page/index.html',
      'dist/relayer/sequence-v2-bytecode.json',
      'contracts/Multicall3.sol',
      'README.md',
      'docs/api.md',
      'LICENSE',
    ]) {
      expect(files, f).toContain(f);
    }
    expect(files.filter((f) => /^(test|bench|src|console|scripts)\/|\.test\.|\.ts$/.test(f))).toEqual([]);

    // An operator's install is quiet: no engine warning (a dependency wanting a newer Node than
    // engines.node says) and no install-script warning (the checkout's `prepare` is not packed).
    expect(pkg.installOutput.split('\n').filter((l) => /npm warn/i.test(l) && /engine|prepare|install-scripts|allowScripts/i.test(l))).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(pkg.nodeModules, 'metarelay', 'package.json'), 'utf8'));
    expect(manifest.scripts?.prepare).toBeUndefined();
    expect(pkg.packedFromManifest).toContain('"prepare"');
    for (const dev of ['tsx', 'typescript', 'vite', 'vitest', '@0xsequence/wallet-contracts']) expect(existsSync(join(pkg.nodeModules, dev)), dev).toBe(false);
    const kb = Number(sh('du', ['-sk', pkg.nodeModules], pkg.nodeModules).split('\t')[0]);
    // docs/production.md's installed size ("now" row) is this measurement: it may not drift more than 10 %
    // (nor the top-level module count by more than 10) before the doc is measured again.
    const documented = /\| now \(\S+ at this page's last change: (\d+) top-level modules\) \| (\d+) MB \|/.exec(readFileSync('docs/production.md', 'utf8'));
    expect(documented, 'docs/production.md: the installed size\'s "now" row').not.toBeNull();
    const [docModules, docMb] = [Number(documented![1]), Number(documented![2])];
    const mb = Math.round(kb / 1024);
    expect(Math.abs(mb - docMb) / docMb, `installed ${mb} MB, docs/production.md says ${docMb} MB: measure it again and update the doc`).toBeLessThanOrEqual(0.1);
    expect(Math.abs(readdirSync(pkg.nodeModules).length - docModules), `${readdirSync(pkg.nodeModules).length} top-level modules, the doc says ${docModules}`).toBeLessThanOrEqual(10);
    const installed = appOf(pkg);
    const { app, bin } = installed;

    const port = await freePort();
    const cfg = join(app, 'metarelay.json');
    writeFileSync(
      cfg,
      JSON.stringify({
        port,
        database: testDb.location,
        logLevel: 'info',
        chains: [
          {
            chainId: anvil.chainId,
            name: 'anvil',
            rpcUrls: [anvil.rpcUrl],
            watch: false,
            relayer: { senderKeysFile: 'sender.key', feeTokens: [{ name: 'Ether', symbol: 'ETH', decimals: 18, nativePrice: '1' }] },
          },
        ],
      }),
    );
    writeFileSync(join(app, 'sender.key'), `${ANVIL_DEPLOYER_KEY}\n`);
    const env = { METARELAY_QUOTE_SECRET: 'q'.repeat(48) };
    const cli = (...args: string[]) => sh(process.execPath, [bin, ...args], app, env);
    cli('migrate', '--config', cfg);
    cli('projects', 'create', 'operator', '--config', cfg);
    const key = JSON.parse(cli('keys', 'create', '--project', 'operator', '--config', cfg)).accessKey as string;

    const t0 = performance.now();
    const srv = spawn(process.execPath, [bin, 'serve', '--config', cfg], { cwd: app, env: { ...cleanEnv, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    srv.stdout.on('data', (d) => (out += d));
    srv.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => srv.on('exit', (code) => r(code)));
    const base = `http://127.0.0.1:${port}`;
    try {
      let readyMs = 0;
      for (;;) {
        const res = await fetch(`${base}/ready`).catch(() => undefined);
        if (res?.status === 200) {
          readyMs = Math.round(performance.now() - t0);
          break;
        }
        if (srv.exitCode !== null) throw new Error(`serve exited ${srv.exitCode}:\n${out}`);
        if (performance.now() - t0 > 60_000) throw new Error(`serve not ready in 60 s:\n${out}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(await (await fetch(`${base}/health`)).json()).toMatchObject({ status: 'ok' });
      // A REST read: the contract info of the sender's address (an account with no code).
      const sender = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
      const info = await fetch(`${base}/tokens/anvil/${sender}?accessKey=${key}`);
      expect(info.status).toBe(200);
      expect(await info.json()).toMatchObject({ chainId: anvil.chainId, address: sender });
      const fees = await fetch(`${base}/relayer/anvil/rpc/Relayer/FeeTokens`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-access-key': key }, body: '{}' });
      expect(await fees.json()).toMatchObject({ isFeeRequired: true, tokens: [expect.objectContaining({ symbol: 'ETH', decimals: 18 })] });
      srv.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out).not.toContain(key.slice(3));

      // The other ways to start it (npx, npm start, a container entry) and SIGINT: package-signals.test.ts.
      // Figures, not assertions: what an operator installs and waits for.
      console.log(
        `package: ${readdirSync(pkg.nodeModules).length} top-level modules, ${Math.round(kb / 1024)} MB installed; serve cold start to /ready ${readyMs} ms (npm pack with the build ${pkg.packMs} ms, install ${pkg.installMs} ms${pkg.fresh ? '' : ', both earlier: reused'})`,
      );
      installedApp = installed;
    } finally {
      if (srv.exitCode === null) srv.kill('SIGKILL');
      if (!installedApp) installed.remove();
    }
  });

  it('drains under load from the installed package: exits 0 and frees the port, and every accepted meta-transaction is kept and mined once', { timeout: 400_000 }, async () => {
    if (!installedApp) throw new Error('the package was not installed (the test above failed)');
    await drainUnderLoad(installedApp);
  });
});
