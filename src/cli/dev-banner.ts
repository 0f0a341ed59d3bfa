/** What `metarelay dev` writes to its manifest file: the running service, the dev chain and its samples (devchain DevManifest is the chain part). */
export interface DevServiceManifest {
  baseUrl: string;
  /** The dev project's publishable key: reads, relays, streams. */
  accessKey: string;
  /** Its secret key: also writes (collections, uploads, webhook listeners); never from a browser. */
  secretKey: string;
  project: string;
  chain: { chainId: number; name: string; rpcUrl: string };
  contracts: Record<string, string>;
  tokens: Record<string, string[]>;
  originUrl: string;
  /** The relayer of the dev chain; `new RpcRelayer({ url: relayerUrl, ... })` works against it. */
  relayerUrl: string;
  /** The indexer of the dev chain; `new SequenceIndexer(indexerUrl, accessKey)` works against it. */
  indexerUrl: string;
  /** The address that holds the sample tokens (the deployer). */
  holder: string;
  sequenceContext: Record<string, string>;
  /** The EIP-7702 wallet implementation EOAs may delegate to (docs/relayer-7702.md). */
  delegatedWallet: string;
  feeToken: { address: string; symbol: string; decimals: number };
  /** Live prices of DUSD (docs/fee-prices.md): Chainlink feeds and a Uniswap v3 pool, moved with `adminKey`. */
  priceFeeds: { ethUsd: string; dusdUsd: string; pool: string; wrappedNative: string; poolHelper: string; adminKey: string };
  /** EOAs to own test wallets with (anvil's well-known keys: never use them on a real network). */
  testSigners: { privateKey: string; address: string }[];
  /** The project console, and an admin token to sign in to it with. */
  consoleUrl: string;
  adminToken: string;
  /** The dev project's sample collection (docs/collections.md) and the ERC-721 whose base URI points at it. */
  collection?: { id: number; contract: string; tokens: string[]; holder: string; tokenMetadataURI: string; contractMetadataURI: string };
}
import { existsSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The gasless example ships with the checkout (not the npm package): from src/cli or dist/cli, ../../examples. */
const EXAMPLE = fileURLToPath(new URL('../../examples/relay-gasless.mjs', import.meta.url));

/**
 * The example's command as it works from here: it reads the manifest from METARELAY_MANIFEST (else
 * .metarelay/dev.json under the folder it runs in), so the path this run wrote is given with it. None
 * where the example is not there (an installed package).
 */
export function exampleHint(manifestPath: string, rel: (p: string) => string, example = EXAMPLE): string[] {
  if (!existsSync(example)) return [];
  return [`  METARELAY_MANIFEST=${rel(manifestPath)} node ${rel(example)}   (a new wallet sends tokens without holding any ETH)`];
}

/** What a developer copies from: the URLs, the key, and requests that work as printed. */
export function devBanner(o: { manifest: DevServiceManifest; manifestPath: string; database: string; seconds: number }): string {
  const m = o.manifest;
  const rel = (p: string) => (p.startsWith('/') ? relative(process.cwd(), p) || p : p);
  const post = (method: string, body: string, withKey: boolean) =>
    `curl -s -X POST ${m.baseUrl}/rpc/Metadata/${method} -H 'Content-Type: application/json'${withKey ? ` -H 'X-Access-Key: ${m.accessKey}'` : ''} -d '${body}'`;
  const lines = [
    '',
    `metarelay dev is ready (${o.seconds.toFixed(1)} s)`,
    '',
    `  API         ${m.baseUrl}`,
    `  Chain       ${m.chain.name} (chainId ${m.chain.chainId}) at ${m.chain.rpcUrl}, a block every second`,
    `  Contracts   ${Object.entries(m.contracts)
      .map(([k, v]) => `${k} ${v}`)
      .join('\n              ')}`,
    `  Origin      ${m.originUrl} (token metadata documents)`,
    `  Database    ${rel(o.database)}`,
    `  Relayer     ${m.relayerUrl} (Sequence v2 wallets; the dev project sponsors the sample contracts)`,
    `  Indexer     ${m.indexerUrl} (balances and transfer history; the samples are held by ${m.holder})`,
    `  Access key  ${m.accessKey} (project "${m.project}", publishable: reads, relays, streams)`,
    `  Secret key  ${m.secretKey} (writes: collections, uploads, webhook listeners; from a backend only)`,
    `  Console     ${m.consoleUrl} (sign in with admin token ${m.adminToken})`,
    ...(m.collection ? [`  Collection  ${m.collection.tokenMetadataURI} (hosted here; ERC-721 ${m.collection.contract} points at it)`] : []),
    `  Manifest    ${rel(o.manifestPath)}`,
    `  Health      ${m.baseUrl}/health  ${m.baseUrl}/ready  ${m.baseUrl}/metrics (/ready's full body and /metrics: -H 'Authorization: Bearer ${m.adminToken}')`,
    '',
    'Try:',
    `  curl -s ${m.baseUrl}/tokens/${m.chain.name}/${m.contracts.erc721}/1,2,3`,
    ...(m.collection ? [`  curl -s ${m.baseUrl}/tokens/${m.chain.name}/${m.collection.contract}/${m.collection.tokens.join(',')}`] : []),
    `  ${post('GetTokenMetadata', JSON.stringify({ chainID: m.chain.name, contractAddress: m.contracts.erc1155, tokenIDs: m.tokens.erc1155 }), true)}`,
    `  curl -s -X POST ${m.relayerUrl}/rpc/Relayer/FeeTokens -H 'Content-Type: application/json' -d '{}'`,
    `  curl -s -X POST ${m.indexerUrl}/rpc/Indexer/GetTokenBalances -H 'Content-Type: application/json' -H 'X-Access-Key: ${m.accessKey}' -d '${JSON.stringify({ accountAddress: m.holder, includeMetadata: true })}'`,
    ...exampleHint(o.manifestPath, rel),
    '',
    'Ctrl-C stops the service and the chain.',
    '',
  ];
  return lines.join('\n');
}
