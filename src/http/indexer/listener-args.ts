import { z } from 'zod';
import { eventTopicOf, type ListenerFilter } from '../../events/listener-filter.ts';
import type { ChainIndexer } from '../../indexer/index.ts';
import type { Services } from '../../services.ts';
import { IndexerErrors, RpcError } from '../core/errors.ts';
import type { RpcContext } from '../core/webrpc.ts';
import { AddressArg, TokenIdArg, WebhookUrlArg } from '../core/args.ts';

/** What the listener arguments are checked against: the projects (an admin's projectId), and the delivery's URL vetting. */
export type ListenerArgDeps = Pick<Services, 'projects' | 'events'>;

// The webhook-listener methods' request schemas (EventFilter, WebhookListener of indexer.gen.ts) and
// the rules that turn them into what a listener keeps. Unknown fields are refused, never dropped; a
// JSON null (Go clients send one for an empty list) counts as left out.

export const bad = (msg: string) => new RpcError(IndexerErrors.InvalidArgument, msg);

/** The most values of each filter list: a listener is matched on every indexed step. */
export const FILTER_LIMITS = { events: 10, contractAddresses: 100, accounts: 100, tokenIDs: 100 } as const;

const list = <T extends z.ZodType>(item: T, max: number) => z.array(item).max(max, `at most ${max}`).nullish();

export const EventFilterArg = z
  .object({
    events: list(z.string().max(300), FILTER_LIMITS.events),
    // Sequence's documentation names this field beside `events` (its schema does not): topic hashes,
    // kept with `events` (an events entry may be a topic hash).
    topicHashes: list(z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'a 32-byte topic hash (0x and 64 hex digits)'), FILTER_LIMITS.events),
    contractAddresses: list(AddressArg, FILTER_LIMITS.contractAddresses),
    accounts: list(AddressArg, FILTER_LIMITS.accounts),
    tokenIDs: list(TokenIdArg, FILTER_LIMITS.tokenIDs),
  })
  .strict();

/** `projectId` of the schema's requests: 0 and null are "not given" (Go's zero value). */
export const ProjectIdArg = z.number().int().nonnegative().nullish();
export const ListenerId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/** The WebhookListener an update sends back: absent fields are left as they are. */
export const ListenerArg = z
  .object({
    id: ListenerId,
    projectID: z.number().int().nonnegative().nullish(),
    url: WebhookUrlArg.optional(),
    filters: EventFilterArg.optional(),
    name: z.string().trim().max(200).optional(),
    updatedAt: z.string().max(64).nullish(),
    active: z.boolean().optional(),
    // metarelay's own answer field, sent back with the rest of a listener as read: why it was disabled
    // is not a setting (resuming it clears the reason), so its value changes nothing.
    disabledReason: z.string().max(1_000).nullish(),
  })
  .strict();

/**
 * The project a call acts for: the access key's (a `projectId` naming another is refused), or, with
 * an admin token, the one `projectId` names.
 */
export async function projectOf(s: ListenerArgDeps, ctx: RpcContext, projectId: number | null | undefined): Promise<number> {
  const named = projectId || undefined;
  if (ctx.project) {
    if (named !== undefined && named !== ctx.project.id) {
      throw new RpcError(IndexerErrors.PermissionDenied, `projectId ${named} is not the project of this access key (project ${ctx.project.id})`);
    }
    return ctx.project.id;
  }
  if (!ctx.admin) throw new RpcError(IndexerErrors.Unauthorized, 'webhook listeners belong to a project: send its access key (X-Access-Key)');
  if (named === undefined) throw bad('projectId: required with an admin token (it names the project whose listeners these are)');
  if (!(await s.projects.getById(named))) throw new RpcError(IndexerErrors.ProjectNotFound, `no project ${named}`);
  return named;
}

/**
 * Addresses that stand for everyone, refused in `accounts`: a listener on one is told of a large share
 * of every contract's logs (issue 54: `accounts: [0x0]` heard every mint and burn on the chain).
 */
const EVERYONE = new Map([
  ['0x0000000000000000000000000000000000000000', 'is the zero address (the `from` of every mint and the `to` of every burn)'],
  ['0x000000000000000000000000000000000000dead', 'is the conventional burn address'],
  ['0xeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee', 'stands for the native token in many contracts'],
]);

/**
 * A filter as a listener keeps it, or InvalidArgument naming what cannot be honoured: an entry of
 * `events` that is no event, a filter on every transfer of the chain, an everyone-address in `accounts`,
 * a contract a watchlist chain does not index.
 */
export async function listenerFilter(ix: ChainIndexer, f: z.infer<typeof EventFilterArg>): Promise<ListenerFilter> {
  const uniq = <T>(xs: T[] | null | undefined) => [...new Set(xs ?? [])];
  const events = uniq([...(f.events ?? []), ...(f.topicHashes ?? []).map((t) => t.toLowerCase())].map((e) => e.trim()));
  if (events.length > FILTER_LIMITS.events) throw bad(`filters: at most ${FILTER_LIMITS.events} events and topicHashes together`);
  const topics = events.map((e) => {
    const got = eventTopicOf(e);
    if ('problem' in got) throw bad(`filters.events: ${got.problem}`);
    return got.topic;
  });
  const filter: ListenerFilter = { events, topics: uniq(topics), contractAddresses: uniq(f.contractAddresses), accounts: uniq(f.accounts), tokenIDs: uniq(f.tokenIDs) };
  if (!filter.contractAddresses.length && !filter.accounts.length) {
    throw bad('filters: name contractAddresses or accounts (or both): a listener on every transfer of the chain is not offered');
  }
  const everyone = filter.accounts.filter((a) => EVERYONE.has(a));
  if (everyone.length) {
    throw bad(
      `filters.accounts: ${everyone.join(', ')} ${EVERYONE.get(everyone[0]!)}: a listener on it would hear a share of the whole chain's logs (every mint and burn), not one account's; name the contract (contractAddresses) and the events instead`,
    );
  }
  if (ix.scope === 'watchlist' && filter.contractAddresses.length) {
    const watched = new Set(await ix.watchlist.list());
    const missing = filter.contractAddresses.filter((c) => !watched.has(c));
    if (missing.length) {
      throw bad(
        `filters.contractAddresses: ${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ` and ${missing.length - 3} more` : ''} ${missing.length > 1 ? 'are' : 'is'} not on ${ix.chain.name}'s watchlist, and the indexer reads only watched contracts there (scope: watchlist): add ${missing.length > 1 ? 'them' : 'it'} with Console/IndexerWatch or \`metarelay indexer watch\` first`,
      );
    }
  }
  return filter;
}

/** The URL a listener is given, refused when deliveries to it would be (docs/webhooks.md, Addresses). */
export async function vetUrl(s: ListenerArgDeps, url: string): Promise<string> {
  const problem = await s.events.post.vet(url);
  if (problem) throw bad(`url: ${problem}`);
  return url;
}
