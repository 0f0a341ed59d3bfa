import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Hex } from 'viem';

const require = createRequire(import.meta.url);
const cache = new Map<string, Hex>();

/**
 * Creation bytecode of a Sequence v2 contract, read from the typechain factories of
 * @0xsequence/wallet-contracts@2.0.0: the only form in which that release ships the production bytecode.
 */
export function sequenceCreationCode(name: string): Hex {
  const hit = cache.get(name);
  if (hit) return hit;
  const pkg = require.resolve('@0xsequence/wallet-contracts/package.json');
  const file = pkg.replace(/package\.json$/, `gen/typechain/factories/${name}__factory.ts`);
  const text = readFileSync(file, 'utf8');
  const m = /const _bytecode\s*=\s*"(0x[0-9a-fA-F]+)"/.exec(text);
  if (!m) throw new Error(`no bytecode found in ${file}`);
  cache.set(name, m[1] as Hex);
  return m[1] as Hex;
}
