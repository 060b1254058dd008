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

/** `env` is added to the test's environment (jest's process.env is a copy the child does not see). */
export function runKreplay(
  args: string[],
  timeoutMs = 60_000,
  env: NodeJS.ProcessEnv = {},
): Promise<CliResult> {
  return new Promise((resolve) => {
    const options = { timeout: timeoutMs, env: { ...process.env, ...env } };
    execFile(process.execPath, [KREPLAY_BIN, ...args], options, (err, stdout, stderr) => {
      resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}
