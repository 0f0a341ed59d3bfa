import { z } from 'zod';
import type { CollectionsService } from '../../collections/index.ts';
import {
  AddressArg,
  ChainArg,
  CollectionMetadataArg,
  MetadataErrors,
  type MethodDef,
  RpcError,
  TokenArg,
  TokenIdArg,
  chainFor,
  metadataErrorMap,
  method,
  refusals,
  type ChainArgDeps,
} from '../../http/index.ts';
import { Id, ProjectId, chainName, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the collection edits use: the collections, and the chains' lookup and names. */
export type CollectionEditServices = ConsoleArgDeps & ChainArgDeps & Pick<Services, 'collections'>;

/*
 * The Collections tab's edits: what a Sequence Builder user does in the browser (create a collection,
 * edit its tokens and their attributes, publish, link a contract, see what tokenURI will serve). The
 * console acts as the operator through the same CollectionsService as Sequence's Collections methods
 * (http/collections/collections.ts), so the same rules hold (sanitised documents, quotas, conflicts).
 * Pictures are uploaded through the console's upload route (console/uploads.ts).
 */

const OPERATOR = { admin: true } as const;
const Scoped = { projectId: ProjectId, collectionId: Id };
/** A token's editable document fields: name, description, attributes and a link out. */
const TokenFields = TokenArg.pick({ name: true, description: true, attributes: true, external_url: true });

const tokenURIAbi = [{ type: 'function', name: 'tokenURI', stateMutability: 'view', inputs: [{ name: 'id', type: 'uint256' }], outputs: [{ name: '', type: 'string' }] }] as const;
const uriAbi = [{ type: 'function', name: 'uri', stateMutability: 'view', inputs: [{ name: 'id', type: 'uint256' }], outputs: [{ name: '', type: 'string' }] }] as const;

export function collectionEditMethods({ s, q }: ConsoleDeps<CollectionEditServices>): Record<string, MethodDef<any>> {
  const svc = (): CollectionsService => {
    if (!s.collections) throw new RpcError(MetadataErrors.Fail, 'collections need the media pipeline (media.enabled is false)');
    return s.collections;
  };
  const requireProject = async (id: number) => {
    if (!(await q.project(id))) throw new RpcError(MetadataErrors.ProjectNotFound, `no project ${id}`);
  };
  /** The collection, read as the operator for the project named (another project's is NotFound). */
  const collectionOf = async (projectId: number, collectionId: number) => {
    await requireProject(projectId);
    return refusals(() => svc().collection(OPERATOR, collectionId, projectId));
  };
  const summary = (c: Awaited<ReturnType<CollectionsService['collection']>>) => ({ id: c.id, published: !c.private, ...svc().baseURIs(c) });

  /** What the token's contract answers for tokenURI (ERC-721) or uri (ERC-1155), and whether it is this collection's URL. */
  const onChain = async (chainId: number, contractAddress: string, tokenId: string, tokenMetadataURI: string) => {
    const client = s.chains.get(chainId);
    const base = { chainId, network: chainName(s, chainId), contractAddress };
    if (!client) return { ...base, tokenURI: null, pointsHere: false, error: 'the chain is not configured here' };
    const address = contractAddress as `0x${string}`;
    const read = async (abi: typeof tokenURIAbi | typeof uriAbi, functionName: 'tokenURI' | 'uri') =>
      (await client.public.readContract({ address, abi, functionName, args: [BigInt(tokenId)] } as never).catch(() => undefined)) as string | undefined;
    const uri = (await read(tokenURIAbi, 'tokenURI')) ?? (await read(uriAbi, 'uri'));
    if (typeof uri !== 'string') return { ...base, tokenURI: null, pointsHere: false, error: 'the contract answers neither tokenURI nor uri for this token (not minted?)' };
    return { ...base, tokenURI: uri, pointsHere: uri.trim().startsWith(tokenMetadataURI), error: null };
  };

  return {
    /** A new collection of the project, unpublished (nothing served until it is published). */
    CreateProjectCollection: method({
      input: z.object({ projectId: ProjectId, name: CollectionMetadataArg.shape.name, description: CollectionMetadataArg.shape.description }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const c = await refusals(() => svc().create(OPERATOR, a.projectId, { name: a.name, ...(a.description ? { description: a.description } : {}) }, true));
        return { collection: summary(c) };
      },
    }),
    /** A collection's name and description (the rest of its document is kept). */
    UpdateProjectCollection: method({
      input: z.object({ ...Scoped, name: CollectionMetadataArg.shape.name, description: CollectionMetadataArg.shape.description }),
      handler: async (a) => {
        const c = await collectionOf(a.projectId, a.collectionId);
        const metadata = { ...c.metadata, name: a.name, description: a.description ?? '' };
        return { collection: summary(await refusals(() => svc().update(OPERATOR, a.projectId, c.id, { metadata }))) };
      },
    }),
    /** Publishes (served where tokenURI points) or unpublishes (its URLs answer 404). */
    PublishProjectCollection: method({
      input: z.object({ ...Scoped, published: z.boolean() }),
      handler: async (a) => {
        await collectionOf(a.projectId, a.collectionId);
        return { collection: summary(await refusals(() => svc().publish(OPERATOR, a.projectId, a.collectionId, a.published, false))) };
      },
    }),
    /** The collection, its tokens, files and contract links go. */
    DeleteProjectCollection: method({
      input: z.object(Scoped),
      handler: async (a) => {
        await collectionOf(a.projectId, a.collectionId);
        await refusals(() => svc().remove(OPERATOR, a.projectId, a.collectionId));
        return { deleted: true };
      },
    }),

    CreateCollectionToken: method({
      input: z.object({ ...Scoped, tokenId: TokenIdArg, ...TokenFields.shape, published: z.boolean().optional() }),
      handler: async (a) => {
        await collectionOf(a.projectId, a.collectionId);
        const { projectId, collectionId, tokenId, published, ...doc } = a;
        const t = await refusals(() => svc().createToken(OPERATOR, projectId, collectionId, tokenId, doc, published === undefined ? undefined : !published));
        return { tokenId: t.tokenId };
      },
    }),
    /** The fields sent are set, those left out kept ("" removes one), as UpdateToken does. */
    UpdateCollectionToken: method({
      input: z.object({ ...Scoped, tokenId: TokenIdArg, ...TokenFields.shape, published: z.boolean().optional() }),
      handler: async (a) => {
        await collectionOf(a.projectId, a.collectionId);
        const { projectId, collectionId, tokenId, published, ...doc } = a;
        const r = await refusals(() => svc().updateToken(OPERATOR, projectId, collectionId, tokenId, doc, published === undefined ? undefined : !published));
        return { tokenId: r.token.tokenId };
      },
    }),
    DeleteCollectionToken: method({
      input: z.object({ ...Scoped, tokenId: TokenIdArg }),
      handler: async (a) => {
        await collectionOf(a.projectId, a.collectionId);
        await refusals(() => svc().deleteToken(OPERATOR, a.projectId, a.collectionId, a.tokenId));
        return { deleted: true };
      },
    }),

    /**
     * What the token's metadata URL serves now (null while it is not served, with why), the document it
     * serves once published, and what each linked contract's tokenURI / uri answers for it.
     */
    CollectionTokenPreview: method({
      input: z.object({ ...Scoped, tokenId: TokenIdArg }),
      handler: async (a) => {
        const c = await collectionOf(a.projectId, a.collectionId);
        const r = await refusals(() => svc().token(OPERATOR, a.projectId, c.id, a.tokenId));
        const uris = svc().baseURIs(c);
        const served = await svc().publicToken(c.projectId, c.id, r.token.tokenId);
        const links = await refusals(() => svc().contractLinks(OPERATOR, a.projectId, c.id, 0, 10));
        return {
          url: `${uris.tokenMetadataURI}${r.token.tokenId}`,
          served: served ?? null,
          notServedBecause: served ? null : c.private ? 'the collection is not published' : 'the token is hidden',
          document: svc().document(r.token.metadata, r.assets),
          contracts: await Promise.all(links.items.map((l) => onChain(l.chainId, l.contractAddress, r.token.tokenId, uris.tokenMetadataURI))),
        };
      },
    }),

    /**
     * Links a contract the way the project would (proof of control: link-proof.ts), unless
     * `withoutProof`: the operator's own say-so, as with an admin token on CreateContractCollection.
     */
    LinkCollectionContract: method({
      input: z.object({ ...Scoped, chainID: ChainArg, contractAddress: AddressArg, ownerSignature: z.string().max(10_000).optional(), withoutProof: z.boolean().optional() }),
      handler: async (a) => {
        const c = await collectionOf(a.projectId, a.collectionId);
        const chainId = chainFor(s, a.chainID, metadataErrorMap).chainId;
        const actor = a.withoutProof ? OPERATOR : { projectId: c.projectId };
        const link = await refusals(() => svc().link(actor, a.projectId, { chainId, contractAddress: a.contractAddress, collectionId: c.id, ownerSignature: a.ownerSignature }));
        return { contract: { chainId: link.chainId, network: chainName(s, link.chainId), contractAddress: link.contractAddress } };
      },
    }),
    UnlinkCollectionContract: method({
      input: z.object({ projectId: ProjectId, chainID: ChainArg, contractAddress: AddressArg }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const chainId = chainFor(s, a.chainID, metadataErrorMap).chainId;
        await refusals(() => svc().unlink(OPERATOR, a.projectId, chainId, a.contractAddress));
        return { unlinked: true };
      },
    }),
  };
}
