import { readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAbi } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  compileContracts,
  devPublicClient,
  devWalletClient,
  erc1155IdHex,
  findAnvilBinary,
  MULTICALL3_ADDRESS,
  REPO_ROOT,
  rpcCall,
  startAnvil,
  startDevChain,
  type DevChain,
} from '../src/devchain/index.ts';

const cacheDir = path.join(REPO_ROOT, 'node_modules/.cache/metarelay/solc');

let dev: DevChain;
let client: ReturnType<typeof devPublicClient>;

function decodeDataUri(uri: string, mime: string): string {
  const prefix = `data:${mime};base64,`;
  expect(uri.startsWith(prefix)).toBe(true);
  return Buffer.from(uri.slice(prefix.length), 'base64').toString('utf8');
}

beforeAll(async () => {
  dev = await startDevChain({ cacheDir });
  client = devPublicClient(dev.manifest.chain.rpcUrl, dev.manifest.chain.chainId);
}, 120_000);

afterAll(async () => {
  await dev?.stop();
});

describe('anvil', () => {
  it('answers eth_chainId 31337 and mines a block every second', async () => {
    expect(Number(await rpcCall<string>(dev.anvil.rpcUrl, 'eth_chainId'))).toBe(31337);
    const first = await client.getBlockNumber();
    const deadline = Date.now() + 3_000;
    while ((await client.getBlockNumber()) <= first) {
      if (Date.now() > deadline) throw new Error('anvil mined no block within 3 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    const [a, b] = await Promise.all([client.getBlock({ blockNumber: first }), client.getBlock({ blockNumber: first + 1n })]);
    // A second apart, or a little more when anvil's interval timer fires late on a loaded machine (2 s
    // was seen under a CPU hog): its blocks carry the time they were mined, not a fixed step.
    expect(b.timestamp - a.timestamp).toBeGreaterThanOrEqual(1n);
    expect(b.timestamp - a.timestamp).toBeLessThanOrEqual(3n);
  });

  it('reports anvil startup failures with its stderr', async () => {
    await expect(startAnvil({ args: ['--no-such-flag'] })).rejects.toThrow(/exited during startup[\s\S]*no-such-flag/);
  });

  it('rejects a configured anvil path that does not exist', () => {
    expect(() => findAnvilBinary('/nonexistent/anvil')).toThrow(/configured path/);
  });
});

describe('Multicall3', () => {
  it('aggregates through viem multicall at the canonical address, with allowFailure', async () => {
    const [chainId, missing] = await client.multicall({
      allowFailure: true,
      contracts: [
        { address: MULTICALL3_ADDRESS, abi: dev.artifacts.Multicall3!.abi, functionName: 'getChainId' },
        { address: dev.manifest.contracts.erc721, abi: dev.artifacts.DevERC721!.abi, functionName: 'tokenURI', args: [999n] },
      ],
    });
    expect(chainId).toEqual({ status: 'success', result: 31337n });
    expect(missing!.status).toBe('failure');
  });

  it('reverts aggregate3 when a call that may not fail fails', async () => {
    const abi = parseAbi([
      'struct Call3 { address target; bool allowFailure; bytes callData; }',
      'struct Result { bool success; bytes returnData; }',
      'function aggregate3(Call3[] calls) payable returns (Result[] returnData)',
    ]);
    const failing = { target: dev.manifest.contracts.erc721, callData: '0xdeadbeef' as const };
    const { result } = await client.simulateContract({
      address: MULTICALL3_ADDRESS,
      abi,
      functionName: 'aggregate3',
      args: [[{ ...failing, allowFailure: true }]],
    });
    expect(result[0]!.success).toBe(false);
    await expect(client.simulateContract({ address: MULTICALL3_ADDRESS, abi, functionName: 'aggregate3', args: [[{ ...failing, allowFailure: false }]] })).rejects.toThrow(/Multicall3: call failed/);
  });
});

describe('sample contracts', () => {
  it('ERC20 has 6 decimals and anyone can mint', async () => {
    const { erc20 } = dev.manifest.contracts;
    const abi = dev.artifacts.DevERC20!.abi;
    expect(await client.readContract({ address: erc20, abi, functionName: 'decimals' })).toBe(6);

    const stranger = privateKeyToAccount(generatePrivateKey());
    await rpcCall(dev.anvil.rpcUrl, 'anvil_setBalance', [stranger.address, '0xde0b6b3a7640000']);
    const wallet = devWalletClient(dev.anvil.rpcUrl, 31337, stranger);
    const hash = await wallet.writeContract({ address: erc20, abi, functionName: 'mint', args: [stranger.address, 42_000_000n] });
    expect((await client.waitForTransactionReceipt({ hash })).status).toBe('success');
    expect(await client.readContract({ address: erc20, abi, functionName: 'balanceOf', args: [stranger.address] })).toBe(42_000_000n);
  });

  it('ERC721 tokenURI points at the origin, which serves the document and its image', async () => {
    const { erc721 } = dev.manifest.contracts;
    const abi = dev.artifacts.DevERC721!.abi;
    const uri = await client.readContract({ address: erc721, abi, functionName: 'tokenURI', args: [1n] });
    expect(uri).toBe(`${dev.origin.url}/erc721/1`);
    expect(await client.readContract({ address: erc721, abi, functionName: 'supportsInterface', args: ['0x49064906'] })).toBe(true);

    const doc = (await (await fetch(uri as string)).json()) as { name: string; image: string; attributes: unknown[] };
    expect(doc.name).toBe('Dev ERC721 #1');
    expect(doc.attributes.length).toBeGreaterThan(0);
    const image = await fetch(doc.image);
    expect(image.headers.get('content-type')).toBe('image/svg+xml');
    expect(await image.text()).toContain('<svg');
  });

  it('ERC721 contractURI (ERC-7572) answers and is served', async () => {
    const uri = (await client.readContract({
      address: dev.manifest.contracts.erc721,
      abi: dev.artifacts.DevERC721!.abi,
      functionName: 'contractURI',
    })) as string;
    expect(uri).toBe(`${dev.origin.url}/contract/erc721.json`);
    const doc = (await (await fetch(uri)).json()) as Record<string, unknown>;
    expect(Object.keys(doc)).toEqual(expect.arrayContaining(['name', 'description', 'image', 'external_link', 'banner_image']));
  });

  it('on-chain ERC721 tokenURI decodes to JSON with an SVG image', async () => {
    const uri = (await client.readContract({
      address: dev.manifest.contracts.erc721OnChain,
      abi: dev.artifacts.DevERC721OnChain!.abi,
      functionName: 'tokenURI',
      args: [1n],
    })) as string;
    const doc = JSON.parse(decodeDataUri(uri, 'application/json')) as { name: string; image: string; attributes: unknown[] };
    expect(doc.name).toBe('OnChain #1');
    expect(doc.attributes).toHaveLength(2);
    expect(decodeDataUri(doc.image, 'image/svg+xml')).toMatch(/^<svg[\s\S]*#1<\/text><\/svg>$/);
  });

  it('ERC1155 uri keeps the {id} template, and the substituted URL is served', async () => {
    const uri = (await client.readContract({
      address: dev.manifest.contracts.erc1155,
      abi: dev.artifacts.DevERC1155!.abi,
      functionName: 'uri',
      args: [1n],
    })) as string;
    expect(uri).toBe(`${dev.origin.url}/erc1155/{id}.json`);
    const doc = (await (await fetch(uri.replace('{id}', erc1155IdHex(1n)))).json()) as { decimals: number };
    expect(doc.decimals).toBe(0);
  });
});

describe('origin server', () => {
  it('answers unknown paths with a JSON 404 and serves whatever a test sets', async () => {
    const missing = await fetch(`${dev.origin.url}/nope`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: 'not found' });

    dev.origin.setDocument('/custom', 'not json at all', { status: 503, contentType: 'text/plain' });
    const custom = await fetch(`${dev.origin.url}/custom?x=1`);
    expect([custom.status, custom.headers.get('content-type'), await custom.text()]).toEqual([503, 'text/plain', 'not json at all']);
    expect(dev.origin.requestCount('/custom')).toBe(1);
  });
});

describe('compile cache', () => {
  it('a second compile loads the cached artifacts', async () => {
    const cached = await compileContracts({ cacheDir });
    expect(readdirSync(cacheDir).some((f) => /^contracts-[0-9a-f]{64}\.json$/.test(f))).toBe(true);
    expect(cached.DevERC721!.bytecode).toBe(dev.artifacts.DevERC721!.bytecode);
    expect(Object.keys(cached).sort()).toEqual(Object.keys(dev.artifacts).sort());
  });
});

describe('shutdown', () => {
  it('stop() kills anvil and closes the origin', async () => {
    const { rpcUrl } = dev.anvil;
    const originUrl = dev.origin.url;
    await dev.stop();
    expect(() => process.kill(dev.anvil.pid, 0)).toThrow();
    await expect(rpcCall(rpcUrl, 'eth_chainId', [], { timeoutMs: 1_000 })).rejects.toThrow();
    await expect(fetch(originUrl)).rejects.toThrow();
  });
});
