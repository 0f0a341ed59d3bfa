#!/usr/bin/env node
// Raw-HTTP probe of every method of the Sequence schemas against a running metarelay: which methods
// answer (anything but "no such route" or "method not found"), per service. The method lists are the
// schemas' (Metadata, Collections, Admin, Relayer: the newest Go schemas, deprecated methods included,
// and the legacy methods old SDKs still call — 132 in all; Indexer and IndexerGateway: the generated
// clients in node_modules). Arguments are empty: a method that exists answers, at worst, with an
// argument error.
//
//   node scripts/probe-methods.mjs [--manifest .metarelay/dev.json]   (what `npm start` wrote)
//   node scripts/probe-methods.mjs <base> --network <name> --key <access key> --admin <token>
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const METADATA = [
  ...'Ping Version RuntimeStatus GetTask GetTaskStatus GetContractInfo GetContractInfoBatch FindContractInfo FindContractInfoBatch RefreshContractInfo RefreshContractInfoBatch SearchContractsByQuery SearchContractInfo SearchContractInfoBatch SearchContracts SearchMetadata GetTokenMetadata GetTokenMetadataBatch RefreshTokenMetadata SearchTokenMetadataByQuery SearchTokenMetadata SearchTokenMetadataTokenIDs GetTokenMetadataPropertyFilters RefreshAllContractTokens SearchTokens TokenCollectionFilters GetTokenRefreshStatus SearchTokenIDs GetTokenDirectoryNetworks GetTokenDirectory SearchTokenDirectory DirectoryGetNetworks DirectoryGetCollections DirectorySearchCollections GetNiftyswapTokenQuantity GetNiftyswapUnitPrices GetNiftyswapUnitPricesWithQuantities'.split(
    ' ',
  ),
];
const METADATA_LEGACY =
  'EnqueueTokensForRefresh GetTokenRefreshResult CancelRefreshJob RefreshContractTokens AddContractToMintMonitor RemoveContractFromMintMonitor MintMonitorTriggerJob MintMonitorJobStatus SyncContractTokens AbortContractSync ContractSyncJobStatus'.split(
    ' ',
  );
const COLLECTIONS =
  'CreateCollection GetCollection ListCollections UpdateCollection DeleteCollection PublishCollection UnpublishCollection CreateContractCollection GetContractCollection ListContractCollections UpdateContractCollection DeleteContractCollection CreateToken GetToken ListTokens UpdateToken DeleteToken CreateAsset GetAsset UpdateAsset DeleteAsset'.split(
    ' ',
  );
const ADMIN =
  'RefreshContractInfoUpdatedBefore RefreshTokenMetadataUpdatedBefore GetContractInfoOverride GetContractInfoOverrides AddContractInfoOverride UpdateContractInfoOverride RemoveContractInfoOverride IsInTokenDirectory SetTokenDirectoryFeatureIndex AddContractToTokenDirectory RemoveContractFromTokenDirectory RefreshTokenDirectory AddContractsToTokenDirectory RemoveContractsFromTokenDirectory ModifyFeatureIndex GetFeatureIndex ListTokenDirectory'.split(
    ' ',
  );
const RELAYER =
  'Ping Version RuntimeStatus GetSequenceContext GetChainID SendMetaTxn GetMetaTxnNonce GetMetaTxnReceipt GetMetaTxnStatus Simulate SimulateV3 UpdateMetaTxnGasLimits FeeTokens FeeOptions SendMetaTxnWithBridgeGas FeeOptionsWithBridgeGas GetMetaTxnNetworkFeeOptions StartSender StopSender RepairSender GetMetaTransactions GetTransactionCost GetGasTank AddGasTank UpdateGasTank NextGasTankBalanceAdjustmentNonce AdjustGasTankBalance GetGasTankBalanceAdjustment ListGasTankBalanceAdjustments ListGasSponsors GetGasSponsor AddGasSponsor UpdateGasSponsor RemoveGasSponsor ListEcosystemGasSponsors GetEcosystemGasSponsor AddEcosystemGasSponsor UpdateEcosystemGasSponsor RemoveEcosystemGasSponsor AddressGasSponsors GetProjectBalance AdjustProjectBalance'.split(
    ' ',
  );

/** Relayer methods of older schemas (the Go server's, and the 1.10/2.2 SDKs') that are not in the newest. */
const RELAYER_OLDER = ['ResetSender', 'SentTransactions', 'PendingTransactions', 'ReportGasSponsorUsage'];

/** The methods a generated client calls (`this.url('Name')`), read from its source in node_modules. */
function clientMethods(pkg, file) {
  const root = fileURLToPath(new URL(`../node_modules/${pkg}/`, import.meta.url));
  const src = readFileSync(join(root, file), 'utf8');
  return [...new Set([...src.matchAll(/this\.url\('([A-Za-z]+)'\)/g)].map((m) => m[1]))];
}

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : dflt;
};
const manifestPath = opt('--manifest', '.metarelay/dev.json');
const manifest = existsSync(manifestPath) ? JSON.parse(readFileSync(manifestPath, 'utf8')) : {};
const network = opt('--network', manifest.chain?.name ?? 'anvil');
const key = opt('--key', manifest.accessKey);
const admin = opt('--admin', manifest.adminToken);
const base = (args[0] ?? manifest.baseUrl ?? 'http://127.0.0.1:4000').replace(/\/$/, '');

const services = [
  { name: 'Metadata', path: '/rpc/Metadata/', methods: METADATA },
  { name: 'Metadata (legacy)', path: '/rpc/Metadata/', methods: METADATA_LEGACY },
  { name: 'Collections', path: '/rpc/Collections/', methods: COLLECTIONS },
  { name: 'Admin', path: '/rpc/Admin/', methods: ADMIN },
  { name: 'Relayer', path: `/relayer/${network}/rpc/Relayer/`, methods: RELAYER },
  { name: 'Relayer (older)', path: `/relayer/${network}/rpc/Relayer/`, methods: RELAYER_OLDER },
  { name: 'Indexer', path: `/indexer/${network}/rpc/Indexer/`, methods: clientMethods('@0xsequence/indexer', 'src/indexer.gen.ts') },
  { name: 'IndexerGateway', path: '/rpc/IndexerGateway/', methods: clientMethods('@0xsequence/indexer', 'src/indexergw.gen.ts') },
];

const headers = { 'content-type': 'application/json', ...(key ? { 'x-access-key': key } : {}), ...(admin ? { authorization: `Bearer ${admin}` } : {}) };
let answered = 0;
let total = 0;
for (const s of services) {
  const missing = [];
  for (const m of s.methods) {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 5_000);
    let res;
    try {
      res = await fetch(`${base}${s.path}${m}`, { method: 'POST', headers, body: '{}', signal: ac.signal });
    } catch {
      // A stream method (Subscribe*) keeps the connection open: it answered.
      res = { status: 200, text: async () => '' };
    } finally {
      clearTimeout(timer);
    }
    const body = res.status === 200 ? '' : await res.text().catch(() => '');
    const error = /"error"\s*:\s*"([A-Za-z]+)"/.exec(body)?.[1];
    if (res.status === 404 && (error === 'WebrpcBadRoute' || error === 'MethodNotFound' || !error)) missing.push(m);
  }
  const ok = s.methods.length - missing.length;
  answered += ok;
  total += s.methods.length;
  console.log(`${s.name.padEnd(18)} ${String(ok).padStart(3)} of ${String(s.methods.length).padEnd(3)}${missing.length ? `  missing: ${missing.join(', ')}` : ''}`);
}
console.log(`${'all'.padEnd(18)} ${String(answered).padStart(3)} of ${total}`);
