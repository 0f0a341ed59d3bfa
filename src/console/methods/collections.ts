import { z } from 'zod';
import type { AssetRecord, CollectionRecord, CollectionsService, ContractLink } from '../../collections/index.ts';
import { MetadataErrors, type MethodDef, RpcError, method, refusals } from '../../http/index.ts';
import { isImage } from '../../media/index.ts';
import { Id, PageArgs, ProjectId, chainName, cutPage, idCursor, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the collection methods use: the collections, and the chains' names. */
export type CollectionServices = ConsoleArgDeps & Pick<Services, 'collections'>;
import { blobPicture } from './media.ts';

/*
 * The Collections tab: a project's hosted collections and their tokens with pictures (docs/collections.md).
 * The console acts as the operator, through the same CollectionsService as Sequence's Collections
 * methods, so a project's collections are scoped and refused exactly as there. Pictures are the
 * uploaded files' renditions from this origin (the page's CSP allows no other), as the token page shows.
 */

const OPERATOR = { admin: true } as const;
/** The console's token cursor: the last token id of the page before (a canonical decimal uint256). */
const TokenCursor = z
  .string()
  .trim()
  .regex(/^(0|[1-9]\d{0,77})$/, 'cursor is not one this API answered')
  .optional();
/** The service reads at most 101 rows a page (CollectionsService's PAGE_MAX + 1). */
const PageSize = z.number().int().min(1).max(100).optional();

export function collectionMethods({ s, q }: ConsoleDeps<CollectionServices>): Record<string, MethodDef<any>> {
  const svc = (): CollectionsService => {
    if (!s.collections) throw new RpcError(MetadataErrors.Fail, 'collections need the media pipeline (media.enabled is false)');
    return s.collections;
  };
  const requireProject = async (id: number) => {
    if (!(await q.project(id))) throw new RpcError(MetadataErrors.ProjectNotFound, `no project ${id}`);
  };
  const contracts = (links: ContractLink[], collectionId: number) =>
    links.filter((l) => l.collectionId === collectionId).map((l) => ({ chainId: l.chainId, network: chainName(s, l.chainId), contractAddress: l.contractAddress }));
  const collectionWire = (c: CollectionRecord, links: ContractLink[]) => {
    const uris = svc().baseURIs(c);
    return {
      id: c.id,
      projectId: c.projectId,
      name: typeof c.metadata.name === 'string' ? c.metadata.name : '',
      description: typeof c.metadata.description === 'string' ? c.metadata.description : '',
      published: !c.private,
      tokenCount: c.tokenCount ?? 0,
      tokenMetadataURI: uris.tokenMetadataURI,
      contractMetadataURI: uris.contractMetadataURI,
      contracts: contracts(links, c.id),
      createdAt: c.createdAt.toISOString(),
      updatedAt: c.updatedAt.toISOString(),
    };
  };
  /** The token's picture: its uploaded image first, else any uploaded file that is an image. */
  const pictureOf = (assets: AssetRecord[]) => {
    const images = assets.filter((a) => a.blob && isImage(a.blob.mimeType));
    const shown = images.find((a) => a.metadataField === 'image') ?? images[0];
    return shown?.blob ? blobPicture(shown.metadataField, shown.blob) : null;
  };

  return {
    /** A project's collections, newest first: name, published or not, token count, linked contracts. */
    ListProjectCollections: method({
      input: z.object({ projectId: ProjectId, cursor: PageArgs.cursor, pageSize: PageSize }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const size = a.pageSize ?? 25;
        const [read, usage] = await Promise.all([svc().collectionsPage(OPERATOR, a.projectId, idCursor(a.cursor) ?? null, size + 1), svc().usage(a.projectId)]);
        const { rows, nextCursor } = cutPage(read.items, size, (c) => String(c.id));
        // usage: what the project holds against its quotas (collections.quotas), for the page's header.
        return { collections: rows.map((c) => collectionWire(c, read.links)), nextCursor, total: read.total, usage };
      },
    }),
    /** A collection of the project with a page of its tokens in id order, each with its picture. */
    ListCollectionTokens: method({
      input: z.object({ projectId: ProjectId, collectionId: Id, cursor: TokenCursor, pageSize: PageSize }),
      handler: async (a) => {
        await requireProject(a.projectId);
        const size = a.pageSize ?? 24;
        const read = await refusals(() => svc().tokensPage(OPERATOR, a.projectId, a.collectionId, a.cursor ?? null, size + 1));
        const { rows, nextCursor } = cutPage(read.items, size, (t) => t.tokenId);
        // The collection's own picture (its contractURI document's image), uploaded here.
        const own = await svc().collectionAssets(read.collection.id);
        return {
          collection: { ...collectionWire(read.collection, read.links), picture: pictureOf(own) },
          tokens: rows.map((t) => {
            const assets = read.assets.filter((x) => x.tokenId === t.tokenId);
            const doc = t.metadata;
            return {
              tokenId: t.tokenId,
              name: typeof doc.name === 'string' ? doc.name : '',
              description: typeof doc.description === 'string' ? doc.description : '',
              externalUrl: typeof doc.external_url === 'string' ? doc.external_url : null,
              attributes: Array.isArray(doc.attributes) ? doc.attributes : [],
              published: !t.private,
              picture: pictureOf(assets),
              // A picture the document links to rather than one uploaded here: the page puts it through
              // the media pipeline by the linked contract (TokenPictures), as the token page does.
              imageSource: typeof doc.image === 'string' && !assets.some((x) => x.metadataField === 'image' && x.blob) ? doc.image : null,
              files: assets.filter((x) => x.blob).map((x) => ({ field: x.metadataField, mimeType: x.blob!.mimeType, filename: x.filename })),
              updatedAt: t.updatedAt.toISOString(),
            };
          }),
          nextCursor,
          total: read.collection.tokenCount ?? 0,
        };
      },
    }),
  };
}
