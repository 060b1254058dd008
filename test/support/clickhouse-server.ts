/**
 * A ClickHouse server of the test's own: Debian's clickhouse-server with the
 * packaged config, every path and port overridden (free ports on 127.0.0.1,
 * data in a temporary directory), stopped and removed afterwards.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readdirSync } from 'node:fs';
import { Shipper } from '../../agent/ship/shipper';
import { ClickHouseHttp } from '../../core/clickhouse/http-client';

const SERVER = '/usr/sbin/clickhouse-server';
const CONFIG = '/etc/clickhouse-server/config.xml';

export const clickhouseAvailable = existsSync(SERVER) && existsSync(CONFIG);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export class TestClickHouse {
  private child: ChildProcess | null = null;
  private constructor(
    readonly dir: string,
    readonly httpPort: number,
    private readonly tcpPort: number,
    private readonly interserverPort: number,
  ) {}

  static async create(): Promise<TestClickHouse> {
    const dir = mkdtempSync(join(tmpdir(), 'kreplay-ch-'));
    return new TestClickHouse(dir, await freePort(), await freePort(), await freePort());
  }

  client(database: string): ClickHouseHttp {
    return new ClickHouseHttp({ host: '127.0.0.1', port: this.httpPort, database }, 10_000);
  }

  /** Starts (or restarts, on the same data and ports) and waits until it answers. */
  async start(): Promise<void> {
    const d = this.dir;
    this.child = spawn(
      SERVER,
      [
        `--config-file=${CONFIG}`,
        '--',
        `--path=${d}/data/`,
        `--tmp_path=${d}/tmp/`,
        `--user_files_path=${d}/user_files/`,
        `--format_schema_path=${d}/format_schemas/`,
        `--logger.log=${d}/server.log`,
        `--logger.errorlog=${d}/server.err.log`,
        `--http_port=${this.httpPort}`,
        `--tcp_port=${this.tcpPort}`,
        `--interserver_http_port=${this.interserverPort}`,
        '--listen_host=127.0.0.1',
      ],
      { cwd: d, stdio: 'ignore' },
    );
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        const res = await fetch(`http://127.0.0.1:${this.httpPort}/ping`);
        if (res.ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline)
        throw new Error(`clickhouse-server did not answer in 30 s; see ${d}/server.err.log`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    this.child = null;
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Ships every node store of `dataDir` to `ch` until nothing is left behind. */
export async function shipDataDir(dataDir: string, ch: ClickHouseHttp): Promise<void> {
  for (const name of readdirSync(dataDir).filter((n) => n.endsWith('.db'))) {
    const shipper = new Shipper(join(dataDir, name), ch, { maxDelayMs: 0 });
    shipper.start();
    while (shipper.status().lagEvents > 0 || shipper.status().state === 'starting')
      await new Promise((r) => setTimeout(r, 20));
    await shipper.stop();
  }
}

/** One server for a describe block: started before its tests, destroyed after them. */
export function useClickHouse(): { server: TestClickHouse } {
  const holder = {} as { server: TestClickHouse };
  beforeAll(async () => {
    holder.server = await TestClickHouse.create();
    await holder.server.start();
  });
  afterAll(async () => {
    await holder.server?.destroy();
  });
  return holder;
}
