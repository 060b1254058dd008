/** A real redis-server (apt) on a free loopback port, for tests that record and replay Redis incidents. */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { waitFor } from '../wait';

/** A port nothing listens on now. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** One RESP command to Redis, its first reply line. */
export function redisCommand(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () =>
      socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`),
    );
    socket.once('data', (data) => {
      socket.end();
      resolve(data.toString().split('\r\n')[0]!);
    });
    socket.once('error', reject);
  });
}

/** redis-server on `port` (else a free one), without persistence, answering PING. */
export async function startRedis(wanted?: number): Promise<{ port: number; process: ChildProcess }> {
  const port = wanted ?? (await freePort());
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  await waitFor(async () =>
    (await redisCommand(port, 'PING').catch(() => '')) === '+PONG' ? true : undefined,
  );
  return { port, process: child };
}
