import type { Address } from 'viem';
import { deploySequenceV2Context } from '../../src/devchain/index.ts';
import { sponsorRepo } from '../../src/relayer/intake/sponsors.ts';
import { accessKeyRepo } from '../../src/store/access-keys.ts';
import { projectRepo } from '../../src/store/projects.ts';
import { createTestDb, type TestDb } from './db.ts';
import { startTokenChain, type TokenChain } from './token-chain.ts';

export interface SponsoredChain {
  chain: TokenChain;
  /** An ERC20 ("FUSD") whose calls the project sponsors. */
  token: Address;
  testDb: TestDb;
  accessKey: string;
}

/**
 * What the multi-process relayer tests share: anvil with the Sequence v2 context and a token, and a
 * database holding a project whose key is sponsored for every call to that token. Relayer processes
 * are then started by the test itself, on this database.
 */
export async function startSponsoredChain(label: string): Promise<SponsoredChain> {
  const chain = await startTokenChain();
  await deploySequenceV2Context(chain.anvil.rpcUrl);
  const [token] = await chain.deploy([{ contract: 'DevERC20', args: ['Fee USD', 'FUSD'] }]);
  const testDb = await createTestDb();
  const project = await projectRepo(testDb.db).create(`${label}-${Math.random().toString(36).slice(2, 8)}`);
  const accessKey = (await accessKeyRepo(testDb.db).create(project.id, label)).key;
  await sponsorRepo(testDb.db).add({ projectId: project.id, chainId: chain.chainConfig.chainId, kind: 'CONTRACT', address: token!.toLowerCase() as Address, name: 'token', active: true });
  return { chain, token: token!, testDb, accessKey };
}
