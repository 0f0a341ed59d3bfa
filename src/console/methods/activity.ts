import { z } from 'zod';
import { MetadataErrors, RpcError } from '../../http/errors.ts';
import { explainToken } from '../../http/rest.ts';
import { AddressArg, ChainArg, TokenIdArg, chainFor } from '../../http/services/args.ts';
import { MetaTxId, RelayerPage as Page, metaTxnLog, paging } from '../../http/services/relayer.ts';
import { method, type MethodDef } from '../../http/webrpc.ts';
import { receiptWire } from '../../relayer/receipts.ts';
import { metadataErrorMap } from '../../http/errors.ts';
import { ProjectId, chainIdArg, chainName } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';

const nonceOf = (space: string | null, nonce: string | null) => (space == null || nonce == null ? undefined : ((BigInt(space) << 96n) | BigInt(nonce)).toString());

/** What happened: meta-transactions, refresh tasks, and how a token's metadata was found. */
export function activityMethods({ s, q }: ConsoleDeps): Record<string, MethodDef<any>> {
  return {
    GetMetaTransactions: method({
      input: z.object({ projectId: ProjectId, chainID: ChainArg.optional(), page: Page }),
      handler: async (a) => {
        const p = paging(a.page, 20);
        const { page, rows } = p.cut(await q.metaTxns(a.projectId, a.chainID ? chainIdArg(s, a.chainID) : null, p.offset, p.limit));
        return {
          page,
          transactions: rows.map((r) => ({ ...metaTxnLog(r, nonceOf(r.nonce_space, r.nonce)), network: chainName(s, r.chain_id) })),
        };
      },
    }),
    GetMetaTransaction: method({
      input: z.object({ chainID: ChainArg, metaTxID: MetaTxId }),
      handler: async (a) => {
        const chainId = chainIdArg(s, a.chainID);
        const row = await s.metaTxns.find(chainId, a.metaTxID);
        if (!row) throw new RpcError(MetadataErrors.NotFound, `no meta-transaction ${a.metaTxID} on chain ${chainId}`);
        const bundles = await s.metaTxns.bundlesOf(chainId, row.id);
        const attempts = await q.relayTxs(chainId, row);
        return {
          transaction: { ...metaTxnLog(row, nonceOf(bundles[0]?.nonce_space ?? null, bundles[0]?.nonce ?? null)), network: chainName(s, chainId) },
          receipt: receiptWire(row, bundles),
          bundles,
          // Each signed transaction (first send, re-broadcasts, replacements), as the relay_txs table holds it.
          attempts: attempts.map((t) => ({
            id: t.id,
            sender: t.sender,
            nonce: t.nonce,
            hash: t.hash,
            gasLimit: t.gas_limit,
            maxFee: t.max_fee,
            maxPriorityFee: t.max_priority_fee,
            gasPrice: t.gas_price,
            status: t.status,
            error: t.error,
            createdAt: t.created_at.toISOString(),
            broadcastAt: t.broadcast_at?.toISOString() ?? null,
            minedBlock: t.mined_block,
          })),
        };
      },
    }),
    ListTasks: method({
      input: z.object({ projectId: ProjectId.optional(), limit: z.number().int().min(1).max(200).optional() }),
      handler: async (a) => {
        const tasks = await s.tasks.list(a.projectId ?? null, a.limit ?? 50);
        return {
          tasks: await Promise.all(
            tasks.map(async (t) => ({
              id: t.id,
              projectId: t.project_id,
              kind: t.kind,
              chainId: t.chain_id,
              network: chainName(s, t.chain_id),
              contractAddress: t.contract_address,
              status: t.status,
              source: t.source,
              cancelled: t.cancelled,
              total: t.total,
              succeeded: t.succeeded,
              failed: t.failed,
              lastError: t.last_error,
              createdAt: t.created_at.toISOString(),
              finishedAt: t.finished_at?.toISOString() ?? null,
              failures: t.failed > 0 ? (await s.tasks.items(t.id)).filter((i) => i.failure_reason).map((i) => ({ item: i.item, reason: i.failure_reason })) : [],
            })),
          ),
        };
      },
    }),
    /** A token's metadata and where it came from: the URI read on chain, every URL tried, the document. */
    GetTokenTrace: method({
      input: z.object({ chainID: ChainArg, contractAddress: AddressArg, tokenID: TokenIdArg }),
      handler: async (a) => {
        const chain = chainFor(s, a.chainID, metadataErrorMap);
        const [metadata] = (await s.tokens.getTokens(chain, a.contractAddress, [a.tokenID])).json;
        return { token: JSON.parse(metadata), explanation: await explainToken(s, chain, a.contractAddress, a.tokenID) };
      },
    }),
  };
}
