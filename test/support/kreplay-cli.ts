/**
 * Runs the built `kreplay` CLI asynchronously: a test whose server answers
 * the CLI runs that server in its own process, so spawnSync would deadlock.
 */
import { execFile } from 'node:child_process';
import { KREPLAY_BIN } from './agent-process';

export interface CliResult {
  status: number;
  stdout: string;
  stderr: string;
}

export function runKreplay(args: string[], timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [KREPLAY_BIN, ...args], { timeout: timeoutMs }, (err, stdout, stderr) => {
      resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}
