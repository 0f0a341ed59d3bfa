// A webhook receiver that checks metarelay's signature before trusting a delivery (docs/webhooks.md).
//   WEBHOOK_SECRET=whsec_… PORT=8787 node examples/webhook-receiver.mjs
// Register it with `metarelay webhooks add --project dev --url http://127.0.0.1:8787/hook` (the
// secret is printed then) or in the console; a local receiver needs allowPrivateNetworks (dev has it)
// or its host in webhooks.allowedPrivateHosts.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

const secret = process.env.WEBHOOK_SECRET;
if (!secret) {
  console.error('set WEBHOOK_SECRET to the endpoint secret (whsec_…) shown when it was created');
  process.exit(2);
}
const port = Number(process.env.PORT ?? 8787);
const TOLERANCE_SEC = 300;
const seen = new Set(); // event ids already handled: deliveries are at-least-once

/** `Metarelay-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`. */
function verify(header, body) {
  const fields = header.split(',').map((kv) => kv.trim().split('='));
  const t = Number(fields.find(([k]) => k === 't')?.[1]);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > TOLERANCE_SEC) return false;
  const want = createHmac('sha256', secret).update(`${t}.${body}`).digest();
  return fields
    .filter(([k]) => k === 'v1')
    .some(([, v]) => {
      const got = Buffer.from(v, 'hex');
      return got.length === want.length && timingSafeEqual(got, want);
    });
}

createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    // Verify the raw bytes as received: re-serialised JSON would not match.
    const body = Buffer.concat(chunks).toString('utf8');
    if (!verify(String(req.headers['metarelay-signature'] ?? ''), body)) {
      console.warn('refused: bad or stale signature');
      res.writeHead(401).end();
      return;
    }
    const event = JSON.parse(body);
    // Answer fast (within the deadline); do slow work after answering.
    res.writeHead(204).end();
    if (seen.has(event.id)) return;
    seen.add(event.id);
    const d = event.data;
    if (event.type === 'metatxn.status') console.log(`${event.id} ${event.type} ${d.metaTxnId} → ${d.status}${d.receipt?.txnHash ? ` (${d.receipt.txnHash})` : ''}`);
    else console.log(`${event.id} ${event.type} ${JSON.stringify(d)}`);
  });
})
  // PORT=0 takes any free port; the line says which.
  .listen(port, '127.0.0.1', function () {
    console.log(`listening on http://127.0.0.1:${this.address().port}/hook`);
  })
  .on('error', (err) => {
    console.error(`cannot listen on 127.0.0.1:${port}: ${err.message}`);
    process.exit(1);
  });
