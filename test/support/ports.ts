import { createServer, type AddressInfo } from 'node:net';

/** A TCP port free on 127.0.0.1 right now, for a child process that must be told its port. */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}
