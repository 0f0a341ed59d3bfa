// The metadata domain's front door for the other domains (collections, media, events): what they may
// use of it. The wiring (services.ts) and the faces may reach further in.
export type { Fetcher, FetchJsonOptions, FetchResult } from './fetch/fetch.ts';
export { GATEWAY_SHARE } from './fetch/uri.ts';
export type { ContractChange, ContractRow } from './contracts/contract-store.ts';
export type { TaskRow } from './refresh/task-store.ts';
export type { DocumentChange } from './tokens/token-store.ts';
