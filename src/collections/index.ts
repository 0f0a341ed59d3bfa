// The door the wiring and the HTTP layer use.

export { CollectionsService, CollectionError, DOCUMENT_FIELDS, documentOf, type Actor, type CollectionsDeps } from './service.ts';
export { collectionStore, type CollectionStore, type CollectionRecord, type TokenRecord, type AssetRecord, type ContractLink } from './store.ts';
export { localFirstFetcher } from './local-fetcher.ts';
export { parseCollectionPath } from './local-documents.ts';
export { ChangeFanout } from './change-fanout.ts';
