// http/'s front door: what another face (the console) reuses of the wire layer — the webrpc router and
// its method shapes, the error catalog, how a key, a bearer token and a client address are read, and
// the argument schemas and wire shapes the services' methods take. Nothing inside http/ imports this
// file; the console imports nothing else of http/ (test/layering.test.ts).
export { readAccessKey, readBearer } from './core/auth.ts';
export { AddressArg, ChainArg, NoArgs, TokenIdArg, TokenIdString, WebhookUrlArg, chainFor, type ChainArgDeps } from './core/args.ts';
export { clientAddress } from './core/client-address.ts';
export { MetadataErrors, RpcError, metadataErrorMap } from './core/errors.ts';
export { describeIssues, method, registerWebrpcService, sendError, type MethodDef, type RpcContext, type ServiceDef, type WebrpcDeps } from './core/webrpc.ts';
export { CollectionMetadataArg, TokenArg, refusals } from './collections/wire.ts';
export { explainToken, type RestDeps } from './metadata/rest.ts';
export { MetaTxId } from './relayer/args.ts';
export { metaTxnLog } from './relayer/logs.ts';
export { RelayerPage, paging } from './relayer/paging.ts';
export { MaxGas, WebhookToken, WebhookUrl } from './relayer/sponsors.ts';
