/**
 * A real MariaDB server (apt `mariadb-server`) for tests that record and replay database incidents:
 * a data directory of its own made by mariadb-install-db in a temporary directory, `mariadbd`
 * started on it as the `mysql` user on a free loopback port, without grant tables (any user logs
 * in), as startPostgres does for PostgreSQL. Slow to start: one per test file.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../wait';
import { freePort } from './redis';

export interface MariaDb {
  port: number;
  /** runs SQL through the `mariadb` client as user `app`; its rows, tab-separated */
  sql(statements: string): string;
  stop(): Promise<void>;
}

export async function startMariaDb(): Promise<MariaDb> {
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-mariadb-'));
  const data = join(dir, 'data');
  const uid = Number(execFileSync('id', ['-u', 'mysql'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'mysql'], { encoding: 'utf8' }).trim());
  chownSync(dir, uid, gid);
  execFileSync(
    'mariadb-install-db',
    [
      '--no-defaults',
      `--datadir=${data}`,
      '--user=mysql',
      '--skip-test-db',
      '--auth-root-authentication-method=normal',
    ],
    { stdio: 'ignore', timeout: 120_000 },
  );
  const port = await freePort();
  // the socket and pid file in the data directory, which is the mysql user's
  const server = spawn(
    'mariadbd',
    [
      '--no-defaults',
      `--datadir=${data}`,
      `--socket=${join(data, 'mariadb.sock')}`,
      `--pid-file=${join(data, 'mariadb.pid')}`,
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      '--user=mysql',
      '--skip-grant-tables',
      '--skip-name-resolve',
      '--innodb-buffer-pool-size=32M',
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  const sql = (statements: string) =>
    execFileSync(
      'mariadb',
      ['-h', '127.0.0.1', '-P', String(port), '-u', 'app', '-N', '-B', '-e', statements],
      {
        encoding: 'utf8',
        timeout: 60_000,
      },
    ).trim();
  await waitFor(
    () => {
      if (server.exitCode !== null) throw new Error(`mariadbd exited ${server.exitCode}`);
      try {
        return sql('SELECT 1') === '1';
      } catch {
        return false;
      }
    },
    { what: 'mariadbd to answer', timeoutMs: 60_000 },
  );
  return {
    port,
    sql,
    stop: async () => {
      server.kill('SIGKILL');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
