// The indexer streams' fan-out of one block's logs (src/indexer/stream-logs.ts logFrames): 2 000
// SubscribeEvents streams (half by contract, half by account) over a block of 500 transfer logs, in
// process (no node, no sockets). Prints the time per block handed out.
//
//   npx tsx bench/indexer-stream-fanout.ts
import { pad, toEventSelector, type Hex, type Log, type TransactionReceipt } from 'viem';
import { logFrames, type StreamLogFilter } from '../src/indexer/stream-logs.ts';
import type { TailBlock } from '../src/indexer/stream-tail.ts';

const LOGS = 500;
const STREAMS = 2_000;
const TRANSFER = toEventSelector('Transfer(address,address,uint256)');
const addr = (i: number) => `0x${i.toString(16).padStart(40, '0')}` as Hex;
const log = (i: number) =>
  ({
    address: addr(1000 + (i % 50)),
    topics: [TRANSFER, pad(addr(i), { size: 32 }), pad(addr(i + 1), { size: 32 })],
    data: pad('0x1', { size: 32 }),
    blockNumber: 1n,
    blockHash: '0x',
    transactionHash: `0x${i.toString(16).padStart(64, '0')}`,
    transactionIndex: i,
    logIndex: i,
    removed: false,
  }) as unknown as Log;
const filters: StreamLogFilter[] = Array.from({ length: STREAMS }, (_, i) => ({
  events: new Set(),
  contracts: new Set(i % 2 ? [addr(1000 + (i % 50))] : []),
  accounts: new Set(i % 2 ? [] : [addr(i % 700)]),
  tokenIds: new Set(),
}));

for (let round = 1; round <= 5; round++) {
  const receipts = Array.from({ length: LOGS }, (_, i) => ({ transactionHash: `0x${i.toString(16)}`, transactionIndex: i, logs: [log(i)] })) as unknown as TransactionReceipt[];
  const block: TailBlock = { number: BigInt(round), hash: '0xab', parentHash: '0xcd', timestamp: 1, receipts };
  const t0 = performance.now();
  let frames = 0;
  for (const f of filters) frames += logFrames(block, f).length;
  console.log(`block ${round}: ${STREAMS} streams x ${LOGS} logs: ${(performance.now() - t0).toFixed(0)} ms, ${frames} frames`);
}
