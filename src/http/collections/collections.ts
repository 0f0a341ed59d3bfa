import { z } from 'zod';
import type { CollectionsService } from '../../collections/index.ts';
import { metadataErrorMap as E } from '../core/errors.ts';
import { method, type ServiceDef } from '../core/webrpc.ts';
import { AddressArg, PageArg, TokenIdArg } from '../core/args.ts';
import { nextPage } from '../core/page.ts';
import { AssetArg, CollectionArg, ContractCollectionArg, IdArg, ProjectIdArg, TokenArg, actorOf, assetWire, collectionWire, linkWire, refusals, tokenWire } from './wire.ts';
import { METADATA_SCHEMA } from '../metadata/metadata.ts';

type Page = z.infer<typeof PageArg>;
const pageOf = (p: Page) => ({ page: p?.page ?? 0, pageSize: p?.pageSize ?? 20 });

/**
 * Sequence's Collections service (`/rpc/Collections/`): a project's collections, their tokens and
 * assets, and the contracts linked to them. A project's secret key acts on its own project's; an
 * admin token on any project's (naming it in `projectId`). Publishable keys are refused: they ship in
 * apps, and unpublished collections are the project's own (http/core/access-pipeline.ts, mode `secret`).
 */
export function collectionsService(svc: CollectionsService): ServiceDef {
  const Scoped = { projectId: ProjectIdArg };
  const withAssets = async (c: Awaited<ReturnType<CollectionsService['collection']>>) => collectionWire(svc, c, await svc.collectionAssets(c.id));
  return {
    name: 'Collections',
    schema: METADATA_SCHEMA,
    errors: E,
    defaultAuth: () => 'secret',
    methods: {
      CreateCollection: method({
        input: z.object({ ...Scoped, collection: CollectionArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            const c = await svc.create(actorOf(ctx), a.projectId ?? a.collection.projectId, a.collection.metadata, a.collection.private);
            return { collection: collectionWire(svc, c) };
          }),
      }),
      GetCollection: method({
        input: z.object({ ...Scoped, collectionId: IdArg }),
        handler: (a, ctx) => refusals(async () => ({ collection: await withAssets(await svc.collection(actorOf(ctx), a.collectionId, a.projectId)) })),
      }),
      ListCollections: method({
        input: z.object({ ...Scoped, page: PageArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            const { page, pageSize } = pageOf(a.page);
            const r = await svc.list(actorOf(ctx), a.projectId, page, pageSize);
            return { page: nextPage({ page, pageSize }, r.more), collections: r.items.map((c) => collectionWire(svc, c)) };
          }),
      }),
      UpdateCollection: method({
        input: z.object({ ...Scoped, collection: CollectionArg.extend({ id: IdArg }) }),
        handler: (a, ctx) =>
          refusals(async () => ({
            collection: await withAssets(await svc.update(actorOf(ctx), a.projectId, a.collection.id, { metadata: a.collection.metadata, private: a.collection.private })),
          })),
      }),
      DeleteCollection: method({
        input: z.object({ ...Scoped, collectionId: IdArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            await svc.remove(actorOf(ctx), a.projectId, a.collectionId);
            return { status: true };
          }),
      }),
      PublishCollection: method({
        input: z.object({ ...Scoped, collectionId: IdArg, recursive: z.boolean().optional() }),
        handler: (a, ctx) => refusals(async () => ({ collection: await withAssets(await svc.publish(actorOf(ctx), a.projectId, a.collectionId, true, a.recursive ?? false)) })),
      }),
      UnpublishCollection: method({
        input: z.object({ ...Scoped, collectionId: IdArg }),
        handler: (a, ctx) => refusals(async () => ({ collection: await withAssets(await svc.publish(actorOf(ctx), a.projectId, a.collectionId, false, false)) })),
      }),

      /** metarelay extra: `ownerSignature`, the contract owner()'s signature of the link (link-proof.ts), where the contract does not point at the collection yet. */
      CreateContractCollection: method({
        input: z.object({ ...Scoped, contractCollection: ContractCollectionArg, ownerSignature: z.string().max(10_000).optional() }),
        handler: (a, ctx) => refusals(async () => ({ contractCollection: linkWire(await svc.link(actorOf(ctx), a.projectId, { ...a.contractCollection, ownerSignature: a.ownerSignature })) })),
      }),
      GetContractCollection: method({
        input: z.object({ ...Scoped, chainId: IdArg, contractAddress: AddressArg }),
        handler: (a, ctx) => refusals(async () => ({ contractCollection: linkWire(await svc.contractLink(actorOf(ctx), a.projectId, a.chainId, a.contractAddress)) })),
      }),
      ListContractCollections: method({
        input: z.object({ ...Scoped, collectionId: IdArg.optional(), page: PageArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            const { page, pageSize } = pageOf(a.page);
            const r = await svc.contractLinks(actorOf(ctx), a.projectId, a.collectionId, page, pageSize);
            return {
              contractCollections: r.items.map(linkWire),
              collections: r.collections.map((c) => collectionWire(svc, c)),
              page: nextPage({ page, pageSize }, r.more),
            };
          }),
      }),
      UpdateContractCollection: method({
        input: z.object({ ...Scoped, contractCollection: ContractCollectionArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            await svc.relink(actorOf(ctx), a.projectId, a.contractCollection);
            return { ok: true };
          }),
      }),
      DeleteContractCollection: method({
        input: z.object({ ...Scoped, chainId: IdArg, contractAddress: AddressArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            await svc.unlink(actorOf(ctx), a.projectId, a.chainId, a.contractAddress);
            return { ok: true };
          }),
      }),

      CreateToken: method({
        input: z.object({ ...Scoped, collectionId: IdArg, token: TokenArg, private: z.boolean().optional() }),
        handler: (a, ctx) =>
          refusals(async () => {
            const t = await svc.createToken(actorOf(ctx), a.projectId, a.collectionId, a.token.tokenId, a.token, a.private);
            return { token: tokenWire(svc, t, []), assets: [] };
          }),
      }),
      GetToken: method({
        input: z.object({ ...Scoped, collectionId: IdArg, tokenId: TokenIdArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            const r = await svc.token(actorOf(ctx), a.projectId, a.collectionId, a.tokenId);
            return { token: tokenWire(svc, r.token, r.assets), assets: r.assets.map((x) => assetWire(svc, x)) };
          }),
      }),
      ListTokens: method({
        input: z.object({ ...Scoped, collectionId: IdArg, page: PageArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            const { page, pageSize } = pageOf(a.page);
            const r = await svc.tokens(actorOf(ctx), a.projectId, a.collectionId, page, pageSize);
            return {
              page: nextPage({ page, pageSize }, r.more),
              tokens: r.items.map((t) =>
                tokenWire(
                  svc,
                  t,
                  r.assets.filter((x) => x.tokenId === t.tokenId),
                ),
              ),
            };
          }),
      }),
      UpdateToken: method({
        input: z.object({ ...Scoped, collectionId: IdArg, tokenId: TokenIdArg, token: TokenArg.extend({ tokenId: TokenIdArg.optional() }), private: z.boolean().optional() }),
        handler: (a, ctx) =>
          refusals(async () => {
            const r = await svc.updateToken(actorOf(ctx), a.projectId, a.collectionId, a.tokenId, a.token, a.private);
            return { token: tokenWire(svc, r.token, r.assets) };
          }),
      }),
      DeleteToken: method({
        input: z.object({ ...Scoped, collectionId: IdArg, tokenId: TokenIdArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            await svc.deleteToken(actorOf(ctx), a.projectId, a.collectionId, a.tokenId);
            return { status: true };
          }),
      }),

      CreateAsset: method({
        input: z.object({ ...Scoped, asset: AssetArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            const x = a.asset;
            const created = await svc.createAsset(actorOf(ctx), a.projectId, {
              collectionId: x.collectionId,
              tokenId: x.tokenId ?? '',
              metadataField: x.metadataField,
              filename: x.filename ?? x.name ?? null,
            });
            return { asset: assetWire(svc, created) };
          }),
      }),
      GetAsset: method({
        input: z.object({ ...Scoped, assetId: IdArg }),
        handler: (a, ctx) => refusals(async () => ({ asset: assetWire(svc, (await svc.asset(actorOf(ctx), a.projectId, a.assetId)).asset) })),
      }),
      UpdateAsset: method({
        input: z.object({ ...Scoped, asset: AssetArg.extend({ id: IdArg }) }),
        handler: (a, ctx) =>
          refusals(async () => {
            const x = a.asset;
            const updated = await svc.updateAsset(actorOf(ctx), a.projectId, x.id, { metadataField: x.metadataField, filename: x.filename ?? x.name, tokenId: x.tokenId });
            return { asset: assetWire(svc, updated) };
          }),
      }),
      DeleteAsset: method({
        input: z.object({ ...Scoped, assetId: IdArg }),
        handler: (a, ctx) =>
          refusals(async () => {
            await svc.deleteAsset(actorOf(ctx), a.projectId, a.assetId);
            return { status: true };
          }),
      }),
    },
  };
}
