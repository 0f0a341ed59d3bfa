// Contract info end to end on a real anvil: what the chain says about ERC20 (string and bytes32
// names), ERC721, ERC1155, hybrids, EOAs, EIP-1967 proxies and contractURI documents, through the
// RPC and REST APIs; batch limits; contracts learned from token metadata; chain round trips.

import { encodeFunctionData, keccak256, parseAbi, stringToHex, type Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devPublicClient, startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import type { ContractInfoWire } from '../src/metadata/contracts/contract-view.ts';
import { rpc, startTestService, type TestService, asOperator } from './support/service.ts';
import { b64, eventually, getRest, getTokenMetadata, startTokenChain, type TokenChain } from './support/token-chain.ts';

// Anvil's second default account: an EOA with 10 000 ETH and no code.
const EOA: Address = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
// Nobody has ever used this address.
const NOBODY: Address = '0x5eed0000000000000000000000000000c0ffee01';
const COLD = 20;
const IPFS_GATEWAY = 'https://ipfs.test/ipfs/';

const DATA_DOC = {
  name: 'Data Doc Club Collection',
  description: 'Members only.',
  image: 'ipfs://QmDataDocLogo/logo.png',
  external_link: 'https://ddc.example',
  banner_image: 'https://ddc.example/banner.png',
};

let chain: TokenChain;
let origin: OriginServer;
let t: TestService;
const c = {} as Record<'erc20' | 'mkr' | 'erc721' | 'erc1155' | 'hybrid' | 'nameless' | 'legacyImpl' | 'proxy' | 'dataDoc' | 'originDoc' | 'learned', Address>;
let cold: Address[];

beforeAll(async () => {
  [chain, origin] = await Promise.all([startTokenChain(), startOriginServer()]);
  origin.setDocument('/collection.json', {
    name: 'Origin Doc Collection',
    description: 'Served by the origin.',
    image: `${origin.url}/img/odc.png`,
    external_url: 'https://odc.example',
    featured_image: 'ipfs://QmOriginBanner',
  });
  origin.setDocument('/zlc/1', { name: 'Lantern #1' });
  const dataUri = `data:application/json;base64,${b64(JSON.stringify(DATA_DOC))}`;
  const deployed = await chain.deploy([
    { contract: 'DevERC20', args: ['Stable Dollar', 'SDOL'] },
    { contract: 'TestBytes32Token', args: [stringToHex('Maker', { size: 32 }), stringToHex('MKR', { size: 32 }), 10n ** 24n] },
    { contract: 'DevERC721', args: ['Plain Apes', 'PAPE', `${origin.url}/pape/`, ''] },
    { contract: 'DevERC1155', args: [`${origin.url}/m/{id}.json`] },
    { contract: 'TestHybridToken', args: ['Hybrid Kittens', 'HKIT'] },
    { contract: 'TestNamelessToken', args: ['NONAME', 10n ** 21n] },
    { contract: 'TestLegacyERC721' },
    { contract: 'DevERC721', args: ['Data Doc Club', 'DDC', `${origin.url}/ddc/`, dataUri] },
    { contract: 'DevERC721', args: ['Origin Doc Club', 'ODC', `${origin.url}/odc/`, `${origin.url}/collection.json`] },
    { contract: 'DevERC721', args: ['Zephyr Lantern Club', 'ZLC', `${origin.url}/zlc/`, ''] },
    ...Array.from({ length: COLD }, (_, i) => ({ contract: 'DevERC20', args: [`Cold Token ${i}`, `CLD${i}`] })),
  ]);
  [c.erc20, c.mkr, c.erc721, c.erc1155, c.hybrid, c.nameless, c.legacyImpl, c.dataDoc, c.originDoc, c.learned] = deployed;
  cold = deployed.slice(10);
  const init = encodeFunctionData({ abi: chain.artifacts.TestLegacyERC721!.abi, functionName: 'initialize', args: ['Legacy Proxied Cats', 'LPC'] });
  [c.proxy] = await chain.deploy([{ contract: 'TestERC1967Proxy', args: [c.legacyImpl, init] }]);
  await chain.send([
    { address: c.hybrid, contract: 'TestHybridToken', functionName: 'mint', args: [EOA, 1n] },
    { address: c.learned, contract: 'DevERC721', functionName: 'mint', args: [EOA, 1n] },
    { address: c.proxy, contract: 'TestLegacyERC721', functionName: 'mint', args: [EOA, 7n] },
  ]);
  t = await startTestService({ chains: [chain.chainConfig], ipfsGateways: [IPFS_GATEWAY], metadata: { inlineWaitMs: 30_000, fetchTimeoutMs: 5_000 } });
});

afterAll(async () => {
  await t?.close();
  await Promise.all([chain?.stop(), origin?.stop()]);
});

const call = (method: string, body: unknown) => rpc(t.app, `/rpc/Metadata/${method}`, body, { 'x-access-key': t.accessKey });

async function info(address: string): Promise<ContractInfoWire> {
  const res = await call('GetContractInfo', { chainID: 'anvil', contractAddress: address });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.contractInfo as ContractInfoWire;
}

async function roundTrips(): Promise<number> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: asOperator });
  const m = res.body.match(/^metarelay_chain_rpc_requests_total\{chain="anvil"\} (\d+)/m);
  return m ? Number(m[1]) : 0;
}

describe('chain reads', () => {
  // First, while nothing else is in flight: the counter sees only this batch.
  it('reads 20 cold contracts for GetContractInfoBatch in at most 2 chain round trips', async () => {
    const before = await roundTrips();
    const res = await call('GetContractInfoBatch', { chainID: 'anvil', contractAddresses: cold });
    expect(res.status).toBe(200);
    const map = res.body.contractInfoMap as Record<string, ContractInfoWire>;
    expect(Object.keys(map).sort()).toEqual(cold.map((a) => a.toLowerCase()).sort());
    cold.forEach((a, i) => {
      expect(map[a.toLowerCase()]).toMatchObject({ name: `Cold Token ${i}`, symbol: `CLD${i}`, decimals: 6, type: 'ERC20', deployed: true, status: 'AVAILABLE' });
    });
    const used = (await roundTrips()) - before;
    expect(used).toBeGreaterThan(0);
    expect(used).toBeLessThanOrEqual(2);

    // Cached now: asking again costs nothing.
    const again = await roundTrips();
    expect((await call('GetContractInfoBatch', { chainID: 'anvil', contractAddresses: cold })).status).toBe(200);
    expect((await roundTrips()) - again).toBe(0);
  });

  it('ERC20 with string name and symbol: decimals, type and the ERC20 source', async () => {
    const pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
    const got = await info(c.erc20);
    expect(got).toMatchObject({
      chainId: 31337,
      address: c.erc20.toLowerCase(),
      name: 'Stable Dollar',
      symbol: 'SDOL',
      decimals: 6,
      type: 'ERC20',
      deployed: true,
      source: 'FETCHER_ON_CHAIN_ERC20_INTERFACE',
      status: 'AVAILABLE',
      logoURI: '',
    });
    expect(got.bytecodeHash).toBe(keccak256((await pub.getCode({ address: c.erc20 }))!));
  });

  it('ERC20 whose name() and symbol() return bytes32 (MKR-style) decodes them as text', async () => {
    expect(await info(c.mkr)).toMatchObject({ name: 'Maker', symbol: 'MKR', decimals: 18, type: 'ERC20', deployed: true });
  });

  it('ERC721 and ERC1155 are recognised by ERC165; a contract without name() has an empty name', async () => {
    expect(await info(c.erc721)).toMatchObject({ name: 'Plain Apes', symbol: 'PAPE', type: 'ERC721', deployed: true });
    const erc721 = await info(c.erc721);
    expect(erc721.decimals).toBeUndefined();
    expect(await info(c.erc1155)).toMatchObject({ name: '', symbol: '', type: 'ERC1155', deployed: true });
  });

  it('a contract that is ERC721 by ERC165 and ERC20-ish by behaviour (decimals, totalSupply) is ERC721', async () => {
    // The contract really does answer every ERC20 probe.
    const pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
    const erc20ish = parseAbi(['function decimals() view returns (uint8)', 'function totalSupply() view returns (uint256)']);
    expect(await pub.readContract({ address: c.hybrid, abi: erc20ish, functionName: 'decimals' })).toBe(0);
    expect(await pub.readContract({ address: c.hybrid, abi: erc20ish, functionName: 'totalSupply' })).toBe(1n);
    expect(await info(c.hybrid)).toMatchObject({ name: 'Hybrid Kittens', symbol: 'HKIT', type: 'ERC721' });
  });

  it('an ERC20 whose name() reverts is still ERC20, with an empty name', async () => {
    expect(await info(c.nameless)).toMatchObject({ name: '', symbol: 'NONAME', decimals: 18, type: 'ERC20', deployed: true, status: 'AVAILABLE' });
  });

  it('an EOA and a never-used address are not deployed and UNKNOWN', async () => {
    for (const a of [EOA, NOBODY]) {
      const got = await info(a);
      expect(got).toMatchObject({ address: a.toLowerCase(), deployed: false, type: 'UNKNOWN', name: '', symbol: '', bytecodeHash: '0x', status: 'AVAILABLE' });
      expect(got.decimals).toBeUndefined();
    }
    // The EOA really is funded: "no code" is what makes it undeployed.
    const pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
    expect(await pub.getBalance({ address: EOA })).toBeGreaterThan(0n);
  });

  it('an EIP-1967 proxy whose own ERC165 answers are all false is typed by its implementation', async () => {
    const pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
    const erc165 = parseAbi(['function supportsInterface(bytes4) view returns (bool)']);
    const asks = (address: Address) => pub.readContract({ address, abi: erc165, functionName: 'supportsInterface', args: ['0x80ac58cd'] });
    // The premise: through the proxy the ERC721 answer is false, the implementation says true.
    expect(await asks(c.proxy)).toBe(false);
    expect(await asks(c.legacyImpl)).toBe(true);

    const got = await info(c.proxy);
    expect(got).toMatchObject({ address: c.proxy.toLowerCase(), name: 'Legacy Proxied Cats', symbol: 'LPC', type: 'ERC721', deployed: true });
    // The hash is the proxy's own runtime code, not the implementation's.
    const proxyCode = (await pub.getCode({ address: c.proxy }))!;
    expect(got.bytecodeHash).toBe(keccak256(proxyCode));
    expect(got.bytecodeHash).not.toBe(keccak256((await pub.getCode({ address: c.legacyImpl }))!));
  });
});

describe('contractURI', () => {
  it('maps a data: URI document: image → logoURI, external_link → link, description, banner_image → ogImage, name → ogName', async () => {
    const got = await info(c.dataDoc);
    expect(got).toMatchObject({
      name: 'Data Doc Club', // name() beats the document's name
      symbol: 'DDC',
      type: 'ERC721',
      logoURI: `${IPFS_GATEWAY}QmDataDocLogo/logo.png`,
      source: 'FETCHER_ON_CHAIN_CONTRACT_URI',
      status: 'AVAILABLE',
    });
    expect(got.extensions).toMatchObject({
      description: 'Members only.',
      link: 'https://ddc.example',
      ogImage: 'https://ddc.example/banner.png',
      ogName: 'Data Doc Club Collection',
    });
  });

  it('fetches a contractURI document from an HTTP origin, once', async () => {
    const got = await info(c.originDoc);
    expect(got).toMatchObject({ name: 'Origin Doc Club', logoURI: `${origin.url}/img/odc.png`, type: 'ERC721' });
    expect(got.extensions).toMatchObject({
      description: 'Served by the origin.',
      link: 'https://odc.example',
      ogImage: `${IPFS_GATEWAY}QmOriginBanner`,
      ogName: 'Origin Doc Collection',
    });
    await info(c.originDoc);
    expect(origin.requestCount('/collection.json')).toBe(1);
  });
});

describe('batch, find and REST', () => {
  it('GetContractInfoBatch answers a mix keyed by lower-case address, duplicates folded', async () => {
    const asked = [c.erc20, c.erc721.toLowerCase(), c.erc1155.toUpperCase().replace('0X', '0x'), EOA, NOBODY, c.mkr, c.erc20.toLowerCase()];
    const res = await call('GetContractInfoBatch', { chainID: '31337', contractAddresses: asked });
    expect(res.status).toBe(200);
    const map = res.body.contractInfoMap as Record<string, ContractInfoWire>;
    expect(Object.keys(map).sort()).toEqual([c.erc20, c.erc721, c.erc1155, EOA, NOBODY, c.mkr].map((a) => a.toLowerCase()).sort());
    expect(map[c.erc20.toLowerCase()]).toMatchObject({ type: 'ERC20', symbol: 'SDOL', address: c.erc20.toLowerCase() });
    expect(map[c.erc721.toLowerCase()]).toMatchObject({ type: 'ERC721', symbol: 'PAPE' });
    expect(map[c.erc1155.toLowerCase()]).toMatchObject({ type: 'ERC1155' });
    expect(map[EOA.toLowerCase()]).toMatchObject({ type: 'UNKNOWN', deployed: false });
    expect(map[NOBODY.toLowerCase()]).toMatchObject({ type: 'UNKNOWN', deployed: false });
    expect(map[c.mkr.toLowerCase()]).toMatchObject({ type: 'ERC20', symbol: 'MKR' });
  });

  it('GetContractInfoBatch takes 100 addresses and refuses 101 with InvalidArgument naming the limit', async () => {
    const fake = (k: number) => `0x${(0xfeed0000 + k).toString(16).padStart(40, '0')}`;
    const ok = await call('GetContractInfoBatch', { chainID: 'anvil', contractAddresses: Array.from({ length: 100 }, (_, k) => fake(k)) });
    expect(ok.status).toBe(200);
    expect(Object.keys(ok.body.contractInfoMap)).toHaveLength(100);

    const res = await call('GetContractInfoBatch', { chainID: 'anvil', contractAddresses: Array.from({ length: 101 }, (_, k) => fake(k)) });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'InvalidArgument', code: 2001 });
    expect(res.body.cause).toMatch(/at most 100 contractAddresses/);
  });

  it('FindContractInfo lists the contract on each chain where it exists, and nothing for an unused address', async () => {
    const res = await call('FindContractInfo', { contractAddress: c.mkr.toLowerCase() });
    expect(res.status).toBe(200);
    expect(res.body.contractInfoList).toHaveLength(1);
    expect(res.body.contractInfoList[0]).toMatchObject({ chainId: 31337, address: c.mkr.toLowerCase(), symbol: 'MKR', type: 'ERC20' });

    const none = await call('FindContractInfo', { contractAddress: NOBODY });
    expect(none.status).toBe(200);
    expect(none.body.contractInfoList).toEqual([]);

    const batch = await call('FindContractInfoBatch', { contractAddresses: [c.erc721, NOBODY] });
    expect(batch.status).toBe(200);
    const byAddr = batch.body.contractInfoByChain as Record<string, ContractInfoWire[]>;
    expect(byAddr[c.erc721.toLowerCase()]!.map((i) => [i.chainId, i.type])).toEqual([[31337, 'ERC721']]);
    expect(byAddr[NOBODY.toLowerCase()]).toEqual([]);
  });

  it('REST GET /tokens/<network>/<contract> answers one ContractInfo, by chain name or id', async () => {
    const res = await getRest(t, `/tokens/anvil/${c.hybrid}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ chainId: 31337, address: c.hybrid.toLowerCase(), type: 'ERC721', name: 'Hybrid Kittens', status: 'AVAILABLE' });
    expect(res.headers.etag).toMatch(/^W\/".+"$/);
    const byId = await getRest(t, `/tokens/31337/${c.hybrid.toLowerCase()}`);
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({ address: c.hybrid.toLowerCase(), type: 'ERC721' });
  });
});

describe('learning', () => {
  it('a contract met only through GetTokenMetadata becomes searchable by name', async () => {
    const search = () => call('SearchContracts', { q: 'Zephyr Lantern' });
    // Nobody asked for its contract info yet.
    const before = await search();
    expect(before.status).toBe(200);
    expect(before.body.contractInfo).toEqual([]);

    const [token] = await getTokenMetadata(t, c.learned, ['1']);
    expect(token).toMatchObject({ name: 'Lantern #1', status: 'AVAILABLE' });
    const res = await eventually(search, (r) => expect(r.body.contractInfo.map((i: ContractInfoWire) => i.address)).toEqual([c.learned.toLowerCase()]));
    expect(res.body.contractInfo[0]).toMatchObject({ name: 'Zephyr Lantern Club', symbol: 'ZLC', type: 'ERC721', chainId: 31337 });
  });
});
