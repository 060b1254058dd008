/**
 * A busy host's TCP table without holding a file descriptor: `n` loopback connections, each closed
 * by its listener first, so that the listener's side waits out TIME_WAIT (60 s) in the table while
 * the clients' ephemeral ports are free again at once.
 */
import { connect, createServer } from 'node:net';
import { readFileSync } from 'node:fs';

/** The lines of this network namespace's /proc/net/tcp, its header left out. */
export const tcpTableLines = (): number =>
  readFileSync('/proc/net/tcp', 'utf8').trimEnd().split('\n').length - 1;

/** Leaves `n` TIME_WAIT sockets in /proc/net/tcp, `parallel` connections at a time. */
export async function leaveTimeWait(n: number, parallel = 64): Promise<void> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  let next = 0;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const client = connect(port, '127.0.0.1');
      client.on('error', reject);
      client.resume();
      // the listener's close reaches the client as an end: closing then leaves TIME_WAIT to the listener
      client.on('end', () => client.end());
      client.on('close', () => resolve());
    });
  const worker = async () => {
    while (next++ < n) await one();
  };
  try {
    await Promise.all(Array.from({ length: parallel }, worker));
  } finally {
    server.close();
  }
}
