/** Runs the real `kreplay daemon` as its own process, as deployed, and waits for the URL it listens on. */
import { spawn, type ChildProcess } from 'node:child_process';
import { KREPLAY_BIN } from './agent-process';

export async function startDaemonProcess(args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [KREPLAY_BIN, 'daemon', '--port', '0', '--log-format', 'text', ...args],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let err = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on('data', (chunk: Buffer) => {
      err += chunk.toString();
      const found = /url=(http:\/\/\S+)/.exec(err);
      if (found) resolve(found[1]!);
    });
    child.once('exit', (code) => reject(new Error(`daemon exited ${code}: ${err}`)));
  });
  return { child, url };
}
