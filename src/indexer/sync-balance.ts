import { parseAbi, type Address } from 'viem';
import type { ChainIndexer } from './chain-indexer.ts';
import type { TokenType } from './decode.ts';
import { setBalance } from './transfer-store.ts';

const abi = parseAbi(['function balanceOf(address) view returns (uint256)', 'function balanceOf(address, uint256) view returns (uint256)', 'function ownerOf(uint256) view returns (address)']);

export type SyncOutcome =
  | { ok: true; type: TokenType; before: string; after: string; block: bigint }
  | { ok: false; reason: 'unknownContract' | 'needsTokenId' | 'backfillRunning' | 'notStarted'; message: string };

/**
 * Sets one balance to what the chain says at the follower's cursor block. The difference is the
 * history the indexer never read (transfers before its first block); transfers after the cursor
 * keep adding to it. Done in a transaction holding the cursor, so the follower cannot move while
 * the chain is read. Refused while a backfill of the chain runs: the transfers it has yet to apply
 * would be counted twice. A change is told as the follower's are (balance.updated on a watchlist chain).
 */
export async function syncBalance(ix: ChainIndexer, account: Address, contract: Address, tokenId: string | undefined): Promise<SyncOutcome> {
  const chainId = ix.chain.chainId;
  const type = await ix.reads.contractType(contract);
  if (!type) return { ok: false, reason: 'unknownContract', message: `no transfer of ${contract} has been indexed on ${ix.chain.name}` };
  if (type !== 'ERC20' && tokenId === undefined) return { ok: false, reason: 'needsTokenId', message: `${contract} is an ${type}: tokenID is required` };
  const id = type === 'ERC20' ? '0' : tokenId!;
  return ix.db.transaction(async (tx) => {
    const running = await tx.query(`SELECT 1 FROM indexer_backfills WHERE chain_id = $1 AND status = 'RUNNING' LIMIT 1`, [chainId]);
    if (running.rows.length) return { ok: false, reason: 'backfillRunning', message: `a backfill of ${ix.chain.name} is running; sync after it is done` } as const;
    const cur = await tx.query<{ b: string }>('SELECT block_number::text AS b FROM indexer_cursors WHERE chain_id = $1 AND scope = $2 FOR UPDATE', [chainId, ix.scope]);
    if (!cur.rows[0] || BigInt(cur.rows[0].b) < 0n) return { ok: false, reason: 'notStarted', message: `the indexer of ${ix.chain.name} has not read a block yet` } as const;
    const block = BigInt(cur.rows[0].b);
    const read = { address: contract, abi, blockNumber: block } as const;
    const onChain =
      type === 'ERC20'
        ? await ix.chain.public.readContract({ ...read, functionName: 'balanceOf', args: [account] })
        : type === 'ERC1155'
          ? await ix.chain.public.readContract({ ...read, functionName: 'balanceOf', args: [account, BigInt(id)] })
          : (await ix.chain.public.readContract({ ...read, functionName: 'ownerOf', args: [BigInt(id)] }).catch(() => null))?.toLowerCase() === account
            ? 1n
            : 0n;
    const hash = (await ix.chain.public.getBlock({ blockNumber: block })).hash.toLowerCase();
    const before = await setBalance(tx, chainId, { contract, account, tokenId: id, type, balance: onChain.toString(), blockNumber: Number(block), blockHash: hash }, ix.hooks.onBalances);
    return { ok: true, type, before, after: onChain.toString(), block } as const;
  });
}
