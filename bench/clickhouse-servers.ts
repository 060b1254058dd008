/**
 * A ClickHouse server of the test's own: Debian's clickhouse-server with the
 * packaged config, every path and port overridden (free ports on 127.0.0.1,
 * data in a temporary directory), stopped and removed afterwards; and a
 * cluster of such servers. For the tests (test/support/clickhouse-server.ts
 * wraps them for describe blocks) and the fleet benchmark alike.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readdirSync } from 'node:fs';
import { Shipper } from '../agent/ship/shipper';
import { ClickHouseHttp, type ClickHouseEndpoint } from '../core/clickhouse/http-client';
import { migrateClickHouse } from '../core/clickhouse/schema';

const SERVER = '/usr/sbin/clickhouse-server';
const CONFIG_DIR = '/etc/clickhouse-server';
const CONFIG = `${CONFIG_DIR}/config.xml`;

export const clickhouseAvailable = existsSync(SERVER) && existsSync(CONFIG);

/**
 * A port free on 127.0.0.1, below the kernel's ephemeral range: a port from
 * that range (listen(0)) may be taken by any outgoing connection between the
 * check and the server binding it ("Address already in use"), and tests run
 * in parallel make many.
 */
async function freePort(): Promise<number> {
  const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
    .trim()
    .split(/\s+/)
    .map(Number);
  const top = Math.max(2048, (low ?? 32768) - 1);
  const bottom = Math.max(1024, top - 12_000);
  for (;;) {
    const port = bottom + Math.floor(Math.random() * (top - bottom));
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

export class TestClickHouse {
  private child: ChildProcess | null = null;
  private config = CONFIG;
  private constructor(
    readonly dir: string,
    readonly httpPort: number,
    readonly tcpPort: number,
    private readonly interserverPort: number,
  ) {}

  /**
   * Serves with the packaged config plus a config.d naming `cluster`'s shards
   * (one replica each), as an operator's /etc/clickhouse-server/config.d/ would;
   * config.d is read beside the config file, so both are copied here.
   */
  joinCluster(cluster: string, shards: readonly TestClickHouse[]): void {
    const dir = join(this.dir, 'config');
    mkdirSync(join(dir, 'config.d'), { recursive: true });
    copyFileSync(CONFIG, join(dir, 'config.xml'));
    copyFileSync(join(CONFIG_DIR, 'users.xml'), join(dir, 'users.xml'));
    writeFileSync(join(dir, 'config.d', 'kreplay-cluster.xml'), remoteServersXml(cluster, shards));
    this.config = join(dir, 'config.xml');
  }

  /** SIGSTOP: the server keeps its sockets but answers nothing (a hung host); SIGCONT resumes it. */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): void {
    this.child?.kill(signal);
  }

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
        `--config-file=${this.config}`,
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
    child.kill('SIGCONT'); // a stopped process dies only once continued
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
    // the lag is read from the node file: 0 once ClickHouse acknowledged the last event (or none was new)
    while (shipper.status().lagEvents > 0) await new Promise((r) => setTimeout(r, 20));
    await shipper.stop();
  }
}

/** The `remote_servers` entry of a cluster of one-replica shards (README: "A ClickHouse cluster"). */
export function remoteServersXml(cluster: string, shards: readonly { tcpPort: number }[]): string {
  const entries = shards
    .map((s) => `      <shard><replica><host>127.0.0.1</host><port>${s.tcpPort}</port></replica></shard>`)
    .join('\n');
  return `<yandex>\n  <remote_servers>\n    <${cluster}>\n${entries}\n    </${cluster}>\n  </remote_servers>\n</yandex>\n`;
}

/** Two (or more) servers, each a shard of `name`, each migrated with the cluster's tables. */
export class TestCluster {
  private constructor(
    readonly name: string,
    readonly shards: TestClickHouse[],
  ) {}

  static async create(name = 'kreplay_fleet', count = 2): Promise<TestCluster> {
    const shards: TestClickHouse[] = [];
    for (let i = 0; i < count; i++) shards.push(await TestClickHouse.create());
    for (const shard of shards) shard.joinCluster(name, shards);
    await Promise.all(shards.map((s) => s.start()));
    return new TestCluster(name, shards);
  }

  /** The endpoint of the cluster entered through `shard` (its HTTP port). */
  endpoint(database: string, shard = 0, timeoutMs = 10_000): ClickHouseEndpoint {
    return { host: '127.0.0.1', port: this.shards[shard]!.httpPort, database, cluster: this.name, timeoutMs };
  }

  url(database: string, shard = 0, timeoutSeconds = 10): string {
    return `clickhouse://127.0.0.1:${this.shards[shard]!.httpPort}/${database}?cluster=${this.name}&timeout=${timeoutSeconds}`;
  }

  client(database: string, shard = 0, timeoutMs = 10_000): ClickHouseHttp {
    return new ClickHouseHttp(this.endpoint(database, shard, timeoutMs));
  }

  /** Every shard needs its local tables before the Distributed table can take rows. */
  async migrate(database: string): Promise<void> {
    for (let i = 0; i < this.shards.length; i++) await migrateClickHouse(this.client(database, i));
  }

  async destroy(): Promise<void> {
    await Promise.all(this.shards.map((s) => s.destroy()));
  }
}
