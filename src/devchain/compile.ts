import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, rename, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Abi, Hex } from 'viem';
import { runSolc } from './solc-worker.ts';

export interface Artifact {
  abi: Abi;
  bytecode: Hex;
  deployedBytecode: Hex;
}

export type Artifacts = Record<string, Artifact>;

export interface CompileOptions {
  cacheDir: string;
  log?: (msg: string) => void;
}

// This file lives in <root>/src/devchain/.
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CONTRACTS_DIR = path.join(REPO_ROOT, 'contracts');

// cancun because OpenZeppelin 5.x (ERC721, Strings via Bytes) uses MCOPY; anvil's default hardfork is newer.
const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'cancun',
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
} as const;

// Code the relayer runs on every chain it serves (by state override), not only on the dev chain: built
// for london (the oldest target solc still supports without a deprecation warning), so no PUSH0
// (shanghai) or MCOPY (cancun), which chains that lag behind mainnet lack.
const PORTABLE_FILES = new Set(['RelayProbe.sol']);
const PORTABLE_SETTINGS = { ...SETTINGS, evmVersion: 'london' } as const;

interface SolcError {
  severity: 'error' | 'warning' | 'info';
  formattedMessage: string;
}

interface SolcOutput {
  errors?: SolcError[];
  contracts?: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string }; deployedBytecode: { object: string } } }>>;
}

async function readSources(): Promise<Record<string, { content: string }>> {
  const files = (await readdir(CONTRACTS_DIR)).filter((f) => f.endsWith('.sol')).sort();
  if (files.length === 0) throw new Error(`no .sol files in ${CONTRACTS_DIR}`);
  const sources: Record<string, { content: string }> = {};
  for (const file of files) {
    sources[`contracts/${file}`] = { content: await readFile(path.join(CONTRACTS_DIR, file), 'utf8') };
  }
  return sources;
}

async function packageVersion(require: NodeJS.Require, name: string): Promise<string> {
  const pkg = JSON.parse(await readFile(require.resolve(`${name}/package.json`), 'utf8')) as { version: string };
  return pkg.version;
}

/**
 * Imported OpenZeppelin files are covered by the package version rather than by content: reading
 * them would need the import graph, which only the compiler knows.
 */
function cacheKey(parts: { solc: string; openzeppelin: string; chainlink: string; sources: Record<string, { content: string }> }): string {
  const hash = createHash('sha256');
  hash.update(`solc ${parts.solc}\0openzeppelin ${parts.openzeppelin}\0chainlink ${parts.chainlink}\0${JSON.stringify(SETTINGS)}\0${JSON.stringify(PORTABLE_SETTINGS)}\0${[...PORTABLE_FILES]}\0`);
  for (const [name, { content }] of Object.entries(parts.sources)) hash.update(`${name}\0${content}\0`);
  return hash.digest('hex');
}

function collectArtifacts(output: SolcOutput, log?: (msg: string) => void): Artifacts {
  for (const w of (output.errors ?? []).filter((e) => e.severity === 'warning')) log?.(`solc: ${w.formattedMessage}`);
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length > 0) {
    throw new Error(`solc compilation failed:\n${errors.map((e) => e.formattedMessage).join('\n')}`);
  }
  const artifacts: Artifacts = {};
  for (const [file, contracts] of Object.entries(output.contracts ?? {})) {
    // Only our own contracts: OpenZeppelin's abstract/library units are not deployable artifacts.
    if (!file.startsWith('contracts/')) continue;
    for (const [name, c] of Object.entries(contracts)) {
      if (!c.evm.bytecode.object) continue; // interfaces
      if (artifacts[name]) throw new Error(`two contracts named ${name} in contracts/; names must be unique`);
      artifacts[name] = {
        abi: c.abi,
        bytecode: `0x${c.evm.bytecode.object}`,
        deployedBytecode: `0x${c.evm.deployedBytecode.object}`,
      };
    }
  }
  return artifacts;
}

/** Compiles contracts/*.sol (with OpenZeppelin imports) to artifacts keyed by contract name, cached on disk. */
export async function compileContracts(opts: CompileOptions): Promise<Artifacts> {
  const started = Date.now();
  const require = createRequire(path.join(REPO_ROOT, 'package.json'));
  const [sources, solcVersion, ozVersion, chainlinkVersion] = await Promise.all([
    readSources(),
    packageVersion(require, 'solc'),
    packageVersion(require, '@openzeppelin/contracts'),
    packageVersion(require, '@chainlink/contracts'),
  ]);
  const key = cacheKey({ solc: solcVersion, openzeppelin: ozVersion, chainlink: chainlinkVersion, sources });
  const cacheFile = path.join(opts.cacheDir, `contracts-${key}.json`);

  try {
    const cached = JSON.parse(await readFile(cacheFile, 'utf8')) as Artifacts;
    opts.log?.(`contracts loaded from cache ${cacheFile} in ${Date.now() - started} ms`);
    return cached;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      opts.log?.(`ignoring unreadable compile cache ${cacheFile}: ${(err as Error).message}`);
    }
  }

  opts.log?.(`compiling ${Object.keys(sources).length} contract files with solc ${solcVersion} (first run only: ~20 s on two idle cores, minutes on a loaded machine; cached afterwards)`);
  const pick = (portable: boolean) => Object.fromEntries(Object.entries(sources).filter(([name]) => PORTABLE_FILES.has(path.basename(name)) === portable));
  const compile = (srcs: Record<string, { content: string }>, settings: object) =>
    runSolc(require.resolve('solc'), JSON.stringify({ language: 'Solidity', sources: srcs, settings }), path.join(REPO_ROOT, 'package.json'));
  const run = await compile(pick(false), SETTINGS);
  const portable = await compile(pick(true), PORTABLE_SETTINGS);
  const artifacts = { ...collectArtifacts(JSON.parse(run.output) as SolcOutput, opts.log), ...collectArtifacts(JSON.parse(portable.output) as SolcOutput, opts.log) };

  await mkdir(opts.cacheDir, { recursive: true });
  // Write-then-rename: concurrent test processes may compile at once and must never read half a file.
  const tmp = `${cacheFile}.${process.pid}.${Date.now()}.tmp`;
  await writeFile(tmp, JSON.stringify(artifacts));
  await rename(tmp, cacheFile);
  opts.log?.(`compiled ${Object.keys(artifacts).length} contracts with solc ${run.version} in ${Date.now() - started} ms`);
  return artifacts;
}
