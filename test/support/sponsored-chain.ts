import type { Address } from 'viem';
import { deploySequenceV2Context } from '../../src/devchain/index.ts';
import { sponsorRepo } from '../../src/relayer/intake/sponsors.ts';
import { accessKeyRepo } from '../../src/store/access-keys.ts';
import type { Db } from '../../src/store/db.ts';
import { projectRepo } from '../../src/store/projects.ts';
import { createTestDb, type TestDb } from './db.ts';
import { PAYEE, SENDER_KEYS, type RelayerOverrides } from './relayer-env.ts';
import { startTokenChain, type TokenChain } from './token-chain.ts';

export interface SponsoredChain {
  chain: TokenChain;
  /** An ERC20 ("FUSD") whose calls the project sponsors. */
  token: Address;
  testDb: TestDb;
  accessKey: string;
}

/** anvil with the Sequence v2 context and the test token, FUSD. */
export async function startTokenChainWithContext(): Promise<{ chain: TokenChain; token: Address }> {
  const chain = await startTokenChain();
  await deploySequenceV2Context(chain.anvil.rpcUrl);
  const [token] = await chain.deploy([{ contract: 'DevERC20', args: ['Fee USD', 'FUSD'] }]);
  return { chain, token: token! };
}

/** A project on `db` whose key is sponsored for every call to `token`; its access key. */
export async function sponsoredProject(db: Db, chainId: number, token: Address, label: string): Promise<string> {
  const project = await projectRepo(db).create(`${label}-${Math.random().toString(36).slice(2, 8)}`);
  const accessKey = (await accessKeyRepo(db).create(project.id, label)).key;
  await sponsorRepo(db).add({ projectId: project.id, chainId, kind: 'CONTRACT', address: token.toLowerCase() as Address, name: 'token', active: true });
  return accessKey;
}

/**
 * What the multi-process relayer tests share: anvil with the Sequence v2 context and a token, and a
 * database holding a project whose key is sponsored for every call to that token. Relayer processes
 * are then started by the test itself, on this database.
 */
export async function startSponsoredChain(label: string): Promise<SponsoredChain> {
  const { chain, token } = await startTokenChainWithContext();
  const testDb = await createTestDb();
  const accessKey = await sponsoredProject(testDb.db, chain.chainConfig.chainId, token, label);
  return { chain, token, testDb, accessKey };
}

/** The `chains` entry of a relayer process's config for this chain: the test senders, FUSD as fee token, a 50 ms poll. */
export function relayedChainConfig(chain: TokenChain, token: Address, relayer: RelayerOverrides = {}) {
  return {
    ...chain.chainConfig,
    watch: false,
    relayer: {
      senderKeys: SENDER_KEYS,
      paymentAddress: PAYEE,
      feeTokens: [{ address: token, name: 'Fee USD', symbol: 'FUSD', decimals: 6, nativePrice: '0.0004' }],
      pollMs: 50,
      ...relayer,
    },
  };
}
