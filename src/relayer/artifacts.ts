import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Hex } from 'viem';

const require = createRequire(import.meta.url);
const cache = new Map<string, Hex>();

/** The Sequence contracts metarelay deploys (dev mode) or runs by state override (gas estimation). */
export const SEQUENCE_CONTRACTS = ['Factory', 'MainModule', 'MainModuleUpgradable', 'GuestModule', 'SequenceUtils', 'MainModuleGasEstimation'] as const;

// `npm run build` writes their bytecode here, so the package needs no @0xsequence/wallet-contracts
// (which drags typechain, TypeScript and prettier, ~60 MB, into a production install).
export const BUNDLED_BYTECODE = new URL('./sequence-v2-bytecode.json', import.meta.url);
let bundled: Record<string, Hex> | undefined;

/**
 * Creation bytecode of a Sequence v2 contract, read from the typechain factories of
 * @0xsequence/wallet-contracts@2.0.0: the only form in which that release ships the production bytecode.
 */
export function sequenceCreationCode(name: string): Hex {
  const hit = cache.get(name);
  if (hit) return hit;
  bundled ??= existsSync(BUNDLED_BYTECODE) ? (JSON.parse(readFileSync(BUNDLED_BYTECODE, 'utf8')) as Record<string, Hex>) : {};
  if (bundled[name]) {
    cache.set(name, bundled[name]);
    return bundled[name];
  }
  const pkg = require.resolve('@0xsequence/wallet-contracts/package.json');
  const file = pkg.replace(/package\.json$/, `gen/typechain/factories/${name}__factory.ts`);
  const text = readFileSync(file, 'utf8');
  const m = /const _bytecode\s*=\s*"(0x[0-9a-fA-F]+)"/.exec(text);
  if (!m) throw new Error(`no bytecode found in ${file}`);
  cache.set(name, m[1] as Hex);
  return m[1] as Hex;
}
