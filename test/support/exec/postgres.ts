/**
 * A real PostgreSQL server (apt `postgresql`) for tests that record and replay database incidents:
 * a cluster of its own made by initdb in a temporary directory and started by pg_ctl, as the
 * `postgres` user (the server refuses to run as root), on a free loopback port, trusting local
 * connections.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './redis';

const PG_ROOT = '/usr/lib/postgresql';

export interface Postgres {
  port: number;
  /** psql's connection string for the `postgres` superuser over TCP */
  url: string;
  stop(): void;
}

/** The newest installed server's bin directory (Debian keeps one per major version). */
function pgBin(): string {
  const majors = readdirSync(PG_ROOT)
    .filter((name) => /^\d+$/.test(name))
    .sort((a, b) => Number(b) - Number(a));
  if (majors.length === 0)
    throw new Error(`no PostgreSQL server under ${PG_ROOT}: apt-get install postgresql`);
  return join(PG_ROOT, majors[0]!, 'bin');
}

/** `argv` as the postgres user, its output returned; throws with it on failure. */
function asPostgres(argv: string[]): string {
  return execFileSync('runuser', ['-u', 'postgres', '--', ...argv], { encoding: 'utf8', timeout: 60_000 });
}

export async function startPostgres(): Promise<Postgres> {
  const bin = pgBin();
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-postgres-'));
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  chownSync(dir, uid, gid);
  const data = join(dir, 'data');
  asPostgres([join(bin, 'initdb'), '-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  // the socket in the cluster's own directory: /var/run/postgresql may not be there or ours
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  asPostgres([join(bin, 'pg_ctl'), 'start', '-w', '-D', data, '-l', join(dir, 'server.log'), '-o', options]);
  return {
    port,
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    stop: () => {
      try {
        asPostgres([join(bin, 'pg_ctl'), 'stop', '-m', 'immediate', '-w', '-D', data]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
