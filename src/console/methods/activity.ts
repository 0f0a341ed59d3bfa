import { z } from 'zod';
import {
  AddressArg,
  ChainArg,
  MetaTxId,
  MetadataErrors,
  type MethodDef,
  RelayerPage as Page,
  RpcError,
  TokenIdArg,
  chainFor,
  explainToken,
  metaTxnLog,
  metadataErrorMap,
  method,
  paging,
  type ChainArgDeps,
  type RestDeps,
} from '../../http/index.ts';
import { receiptWire } from '../../relayer/receipts.ts';
import { Id, PageArgs, ProjectId, When, chainIdArg, chainName, cutPage, idCursor, type ConsoleArgDeps } from '../args.ts';
import type { ActivityCursor } from '../queries.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the activity methods read: meta-transactions, relayers, refresh tasks and tokens, a token's explanation, and the chains' names. */
export type ActivityServices = ConsoleArgDeps & ChainArgDeps & RestDeps & Pick<Services, 'metaTxns' | 'relayers' | 'tasks' | 'tokens'>;
import { costOf, decodedCalls } from '../tx-detail.ts';

const nonceOf = (space: string | null, nonce: string | null) => (space == null || nonce == null ? undefined : ((BigInt(space) << 96n) | BigInt(nonce)).toString());

const STATUSES = ['PENDING_PRECONDITION', 'QUEUED', 'SENT', 'SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED', 'DROPPED'] as const;

/** The activity cursor "<queued µs>.<chain id>.<meta-transaction id>", as GetMetaTransactions answers it. */
function activityCursor(c: string | undefined): ActivityCursor | null {
  if (c === undefined) return null;
  const m = /^(\d{1,17})\.(\d{1,15})\.([0-9a-f]{64})$/.exec(c);
  if (!m) throw new RpcError(MetadataErrors.InvalidArgument, `cursor "${c}" is not one GetMetaTransactions answered`);
  return { queuedUs: m[1], chainId: Number(m[2]), id: m[3] };
}

/** What happened: meta-transactions, refresh tasks, and how a token's metadata was found. */
export function activityMethods({ s, q }: ConsoleDeps<ActivityServices>): Record<string, MethodDef<any>> {
  return {
    /**
     * A project's meta-transactions newest first, filtered (network, status, wallet, access key, queued
     * in [from, to)), a page at a time: `cursor` is the `nextCursor` of the page before (`page`, offset
     * pages, is the older form). `total` counts what the filter keeps, `counts` per status.
     */
    GetMetaTransactions: method({
      input: z.object({
        projectId: ProjectId,
        chainID: ChainArg.optional(),
        page: Page,
        ...PageArgs,
        status: z.enum(STATUSES).optional(),
        wallet: AddressArg.optional(),
        keyId: Id.optional(),
        from: When.optional(),
        to: When.optional(),
      }),
      handler: async (a) => {
        const p = paging(a.page ?? (a.pageSize ? { pageSize: a.pageSize } : undefined), 20);
        const size = a.pageSize ?? a.page?.pageSize ?? 20;
        const filter = { chainId: a.chainID ? chainIdArg(s, a.chainID) : undefined, status: a.status, wallet: a.wallet, keyId: a.keyId, from: a.from, to: a.to };
        const after = activityCursor(a.cursor);
        const [read, counts] = await Promise.all([q.metaTxns(a.projectId, filter, after, size + 1, after ? 0 : p.offset), q.metaTxnCounts(a.projectId, filter)]);
        const { page, rows } = p.cut(read);
        const next = cutPage(read, size, (r) => `${r.queued_us}.${r.chain_id}.${r.id}`).nextCursor;
        return {
          page,
          nextCursor: next,
          total: a.status ? (counts[a.status] ?? 0) : Object.values(counts).reduce((x, y) => x + y, 0),
          counts,
          transactions: rows.map((r) => ({ ...metaTxnLog(r, nonceOf(r.nonce_space, r.nonce)), network: chainName(s, r.chain_id), keyId: r.key_id ?? null })),
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
        const relayer = s.relayers.get(chainId);
        return {
          // The calls it makes (decoded where a known ABI fits) and what its gas cost, in native and fee tokens.
          calls: relayer ? decodedCalls(relayer, row) : null,
          cost: relayer ? await costOf(relayer, row) : null,
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
    /** Refresh tasks newest first, of a project and a status, a page at a time (`cursor`: the `nextCursor` before), with counts per status. */
    ListTasks: method({
      input: z.object({ projectId: ProjectId.optional(), limit: z.number().int().min(1).max(200).optional(), ...PageArgs, status: z.enum(['QUEUED', 'PAUSED', 'FAILED', 'DONE']).optional() }),
      handler: async (a) => {
        const size = a.pageSize ?? a.limit ?? 50;
        const filter = { projectId: a.projectId ?? null, status: a.status };
        const [read, counts] = await Promise.all([s.tasks.page(filter, idCursor(a.cursor), size + 1), s.tasks.counts(filter)]);
        const { rows: tasks, nextCursor } = cutPage(read, size, (t) => String(t.id));
        return {
          nextCursor,
          total: a.status ? (counts[a.status] ?? 0) : Object.values(counts).reduce((x, y) => x + y, 0),
          counts,
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
