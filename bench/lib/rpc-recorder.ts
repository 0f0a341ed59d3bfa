import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeFunctionData, parseAbi, toFunctionSelector, type Hex } from 'viem';

// The metrics counter says how many eth_calls were sent, not what they were for; this names them.
const KNOWN = ['supportsInterface(bytes4)', 'tokenURI(uint256)', 'uri(uint256)', 'getBlockNumber()', 'name()', 'symbol()', 'decimals()', 'totalSupply()', 'contractURI()', 'balanceOf(address)'];
const SELECTORS = new Map(KNOWN.map((sig) => [toFunctionSelector(`function ${sig}`), sig.slice(0, sig.indexOf('('))]));
const aggregate3 = parseAbi(['struct Call3 { address target; bool allowFailure; bytes callData; }', 'function aggregate3(Call3[] calls) payable returns ((bool success, bytes returnData)[])']);

function describeCall(data: Hex): string {
  const name = (d: Hex) => SELECTORS.get(d.slice(0, 10) as Hex) ?? d.slice(0, 10);
  try {
    const { args } = decodeFunctionData({ abi: aggregate3, data });
    const counts = new Map<string, number>();
    for (const c of args[0]) counts.set(name(c.callData), (counts.get(name(c.callData)) ?? 0) + 1);
    return `aggregate3[${[...counts].map(([n, k]) => `${k}x ${n}`).join(', ')}]`;
  } catch {
    return name(data);
  }
}

interface JsonRpcRequest {
  method: string;
  params?: unknown[];
}

function describe(r: JsonRpcRequest): string {
  const first = r.params?.[0] as { data?: Hex; input?: Hex } | undefined;
  const data = first?.data ?? first?.input;
  return r.method === 'eth_call' && data ? `eth_call ${describeCall(data)}` : r.method;
}

export interface RoundTrip {
  calls: string[];
}

export interface RpcRecorder {
  url: string;
  /** Round trips since the last take(), each with the calls it carried. */
  take(): RoundTrip[];
  stop(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => resolve(body));
    req.on('error', reject);
  });
}

/** A transparent JSON-RPC proxy in front of `upstream` that logs what each HTTP request carried. */
export function startRpcRecorder(upstream: string): Promise<RpcRecorder> {
  let log: RoundTrip[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      try {
        const body = await readBody(req);
        try {
          const parsed = JSON.parse(body) as JsonRpcRequest | JsonRpcRequest[];
          log.push({ calls: (Array.isArray(parsed) ? parsed : [parsed]).map(describe) });
        } catch {
          log.push({ calls: ['(unparsable)'] });
        }
        const up = await fetch(upstream, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const text = await up.text();
        res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
        res.end(text);
      } catch (err) {
        res.writeHead(502).end(String(err));
      }
    })();
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        take() {
          const out = log;
          log = [];
          return out;
        },
        stop: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
