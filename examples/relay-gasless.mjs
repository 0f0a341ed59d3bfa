// A brand-new Sequence v2 wallet, holding no ETH, mints itself dev tokens and sends some on,
// gasless: the dev project sponsors the sample contracts. Run `npm start` first, then:
//   node examples/relay-gasless.mjs
// (the manifest `metarelay dev` wrote is read from .metarelay/dev.json, or METARELAY_MANIFEST; the
// dev banner prints the command with it). It uses only the official sequence.js v2 client (Wallet +
// RpcRelayer), pointed at metarelay. Without a manifest, or with the service down, it says so in one line.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { v2 } from '@0xsequence/core';
import { RpcRelayer } from '@0xsequence/relayer';
import { Orchestrator, signers } from '@0xsequence/signhub';
import { Wallet } from '@0xsequence/wallet';

// The 2.x packages are CommonJS and expect the CommonJS build of ethers.
const ethers = createRequire(import.meta.url)('ethers');
const manifestPath = process.env.METARELAY_MANIFEST ?? '.metarelay/dev.json';

/** One line on stderr and exit 1: what is missing and what to do, not a stack trace. */
function stop(line) {
  console.error(`relay-gasless: ${line}`);
  process.exit(1);
}

let dev;
try {
  dev = JSON.parse(readFileSync(manifestPath, 'utf8'));
} catch (err) {
  stop(
    err.code === 'ENOENT'
      ? `no dev manifest at ${manifestPath}: start \`npm start\` (metarelay dev) first, or set METARELAY_MANIFEST to the path its banner prints`
      : `cannot read the dev manifest ${manifestPath}: ${err.message}`,
  );
}
// The service and its chain must answer before the wallet client is built (ethers would retry forever).
for (const [what, url, init] of [
  ['metarelay', `${dev.baseUrl}/health`, undefined],
  ['the dev chain', dev.chain.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' }],
]) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(5_000) }).catch((err) => err);
  if (res instanceof Error || !res.ok) stop(`${what} is not answering at ${url} (${res instanceof Error ? (res.cause?.code ?? res.message) : `HTTP ${res.status}`}): is \`npm start\` (metarelay dev) running?`);
}

const provider = new ethers.JsonRpcProvider(dev.chain.rpcUrl, dev.chain.chainId, { staticNetwork: true, cacheTimeout: -1, pollingInterval: 250 });
const owner = new ethers.Wallet(dev.testSigners[0].privateKey);
const relayer = new RpcRelayer({ url: dev.relayerUrl, provider, projectAccessKey: dev.accessKey });
const wallet = Wallet.newWallet({
  coders: v2.coders,
  context: v2.DeployedWalletContext,
  config: v2.config.toWalletConfig({ threshold: 1, checkpoint: 0, members: [{ address: owner.address, weight: 1 }] }),
  chainId: dev.chain.chainId,
  orchestrator: new Orchestrator([new signers.SignerWrapper(owner)]),
  provider,
  relayer,
});

const token = new ethers.Interface(['function mint(address to, uint256 amount)', 'function transfer(address to, uint256 amount) returns (bool)', 'function balanceOf(address) view returns (uint256)']);
const tx = (data) => ({ to: dev.feeToken.address, data, value: 0n, gasLimit: 0n, delegateCall: false, revertOnError: true });
const recipient = dev.testSigners[1].address;

console.log(`wallet ${wallet.address} (owner ${owner.address}), ETH balance ${await provider.getBalance(wallet.address)}`);
const response = await wallet
  .sendTransaction([
    tx(token.encodeFunctionData('mint', [wallet.address, 5_000_000n])),
    tx(token.encodeFunctionData('transfer', [recipient, 1_250_000n])),
  ])
  .catch((err) => stop(`the relayer refused the transaction: ${err.message.split('\n')[0]}`));
const receipt = await response.wait();
const balanceOf = async (who) => token.decodeFunctionResult('balanceOf', await provider.call({ to: dev.feeToken.address, data: token.encodeFunctionData('balanceOf', [who]) }))[0];
console.log(`relayed in block ${receipt.blockNumber}, transaction ${response.hash}`);
console.log(`wallet holds ${await balanceOf(wallet.address)} base units of ${dev.feeToken.symbol}, recipient ${recipient} holds ${await balanceOf(recipient)}`);
provider.destroy();
