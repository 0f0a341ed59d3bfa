// `npm run build` (and `npm pack`, through prepack): the server to dist/ (JavaScript + source maps),
// its migrations beside it, and the console page to dist/console-page. Starts from an empty dist/ so
// nothing deleted from src/ survives in a package.
import { spawnSync } from 'node:child_process';
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const run = (cmd, args) => {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
};

rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true });
run('npx', ['tsc', '-p', 'tsconfig.build.json']);
// migrate.ts reads its SQL next to itself.
cpSync(new URL('../src/store/migrations', import.meta.url), new URL('../dist/store/migrations', import.meta.url), { recursive: true });
// PGlite's worker thread is plain JavaScript (tsc compiles .ts only), loaded from next to pglite.js.
cpSync(new URL('../src/store/pglite-worker.mjs', import.meta.url), new URL('../dist/store/pglite-worker.mjs', import.meta.url));
// The Sequence wallet bytecode, read once from @0xsequence/wallet-contracts (a dev dependency).
const { SEQUENCE_CONTRACTS, BUNDLED_BYTECODE, sequenceCreationCode } = await import('../dist/relayer/artifacts.js');
writeFileSync(BUNDLED_BYTECODE, JSON.stringify(Object.fromEntries(SEQUENCE_CONTRACTS.map((n) => [n, sequenceCreationCode(n)]))));
run('npm', ['run', 'build:console']);
