/**
 * Which processes carry the agent's uprobes (issue 46, rule 2). A uprobe attached to a file puts a
 * breakpoint (int3) in every process that maps it, and each of them pays a trap for every hit,
 * whatever the agent follows. With `--pid` and `--filter-transactions` the agent stores nothing of
 * other processes, so its Go and TLS probes go into the followed processes alone.
 *
 * Two copies of one Go net/http server (the same file) and two Python TLS servers (the same
 * libssl) run; the agent follows one of each. At every probe the agent holds on their files
 * (bpftool perf), the followed process's memory has an int3 and the other's the file's own byte
 * (sites another agent on this machine also probes are left out of that look). The exact signal
 * is the agent's own programs (bpf_stats): their run counts do not move while the unfollowed Go
 * server serves requests and curl fetches from the unfollowed TLS server (curl maps libssl too),
 * and move when the followed server serves. Without `--filter-transactions` another process's
 * transaction is stored: the probes stay on every process.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nativeAddon } from '../../core/native/addon';
import { selfSignedCert } from '../../bench/tls-cert';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { buildGo } from '../support/go-build';
import { listUprobes, programsById } from '../support/uprobes';
import { waitFor } from '../support/wait';

const SERVER = join(__dirname, '..', 'support', 'runtimes', 'append-server.go');
const INT3 = 0xcc;
const REQUESTS = 20;

const TLS_SERVER = `
import http.server, ssl, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\\n")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
`;

interface Server {
  child: ChildProcess;
  port: number;
}

let dir: string;
let binary: string;
const servers: ChildProcess[] = [];
let goFollowed: Server;
let goOther: Server;
let tlsFollowed: Server;
let tlsOther: Server;
let stats: number;

/** Starts a server that prints its port first. */
async function start(command: string, args: string[]): Promise<Server> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  servers.push(child);
  const port = await new Promise<number>((resolve) =>
    child.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim()))),
  );
  return { child, port };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-probe-scope-'));
  binary = buildGo(SERVER, join(dir, 'append-server'));
  const { cert, key } = selfSignedCert(dir);
  [goFollowed, goOther, tlsFollowed, tlsOther] = await Promise.all([
    start(binary, [join(dir, 'followed-lines')]),
    start(binary, [join(dir, 'other-lines')]),
    start('python3', ['-c', TLS_SERVER, cert, key]),
    start('python3', ['-c', TLS_SERVER, cert, key]),
  ]);
  stats = nativeAddon().enableBpfStats();
}, 180_000);

afterAll(() => {
  for (const server of servers) server.kill('SIGKILL');
  if (stats !== undefined) closeSync(stats);
  rmSync(dir, { recursive: true, force: true });
});

/** An agent following the followed Go and TLS servers, once it has probed them. */
async function follow(extra: string[], probed: (output: string) => boolean): Promise<AgentProcess> {
  const agent = await startAgent([
    ...['--data-dir', join(dir, `data-${extra.length}`), '--node', 'scope', '--no-python-hook'],
    ...['--pid', String(goFollowed.child.pid), '--pid', String(tlsFollowed.child.pid), ...extra],
  ]);
  try {
    await waitFor(() => probed(agent.output()), { timeoutMs: 90_000, what: () => agent.output() });
  } catch (err) {
    await agent.stop();
    throw err;
  }
  return agent;
}

/** How many times the programs behind the agent's uprobes ran so far (bpf_stats), those on Go binaries and the others. */
function uprobeRuns(agent: AgentProcess): { go: number; tls: number } {
  const mine = listUprobes().filter((p) => p.pid === agent.child.pid);
  const onGo = new Set(mine.filter((p) => inode(p.filename) === inode(binary)).map((p) => p.progId));
  const programs = programsById();
  const runs = { go: 0, tls: 0 };
  for (const id of new Set(mine.map((p) => p.progId)))
    runs[onGo.has(id) ? 'go' : 'tls'] += programs.get(id)?.runs ?? 0;
  return runs;
}

/** A file's identity, or undefined once it is gone (a /proc/PID/exe of an exited process). */
function inode(file: string): string | undefined {
  try {
    const st = statSync(file);
    return `${st.dev}:${st.ino}`;
  } catch {
    return undefined;
  }
}

/** The byte at a file offset as process `pid` maps it (its memory, where a breakpoint shows), undefined when unmapped. */
function mappedByte(pid: number, file: string, offset: number): number | undefined {
  const ino = inode(file)?.split(':')[1];
  for (const line of readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ (\d+)/.exec(line);
    if (!m || m[4] !== ino) continue;
    const [start, end, from] = [parseInt(m[1]!, 16), parseInt(m[2]!, 16), parseInt(m[3]!, 16)];
    if (offset < from || offset >= from + end - start) continue;
    const fd = openSync(`/proc/${pid}/mem`, 'r');
    try {
      const buf = Buffer.alloc(1);
      readSync(fd, buf, 0, 1, start + offset - from);
      return buf[0];
    } finally {
      closeSync(fd);
    }
  }
  return undefined;
}

function fileByte(file: string, offset: number): number {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.alloc(1);
    readSync(fd, buf, 0, 1, offset);
    return buf[0]!;
  } finally {
    closeSync(fd);
  }
}

/**
 * At each of the agent's probes on the files both processes map: the followed process's byte, and
 * the other's beside the file's where no other process on this machine (another agent) probes the
 * same site.
 */
function sites(agent: AgentProcess, followed: Server, other: Server) {
  const all = listUprobes();
  const foreign = new Set(
    all.filter((p) => p.pid !== agent.child.pid).map((p) => `${inode(p.filename)}@${p.offset}`),
  );
  const mine = all.filter(
    (p) => p.pid === agent.child.pid && mappedByte(followed.child.pid!, p.filename, p.offset) !== undefined,
  );
  return {
    followed: mine.map((p) => mappedByte(followed.child.pid!, p.filename, p.offset)),
    other: mine
      .filter((p) => !foreign.has(`${inode(p.filename)}@${p.offset}`))
      .map((p) => ({
        file: fileByte(p.filename, p.offset),
        other: mappedByte(other.child.pid!, p.filename, p.offset),
      })),
    otherAll: mine.map((p) => mappedByte(other.child.pid!, p.filename, p.offset)),
  };
}

/** The followed process has an int3 at each of the agent's probes on the file, the other none of its own. */
function expectFollowedAlone(agent: AgentProcess, followed: Server, other: Server): void {
  const at = sites(agent, followed, other);
  expect(at.followed.length).toBeGreaterThan(0);
  expect({
    followed: at.followed.filter((b) => b !== INT3),
    other: at.other.filter((b) => b.other !== b.file),
  }).toEqual({ followed: [], other: [] });
}

async function get(port: number, times: number): Promise<void> {
  for (let i = 0; i < times; i++) await (await fetch(`http://127.0.0.1:${port}/`)).text();
}

describe('followed by pid with --filter-transactions', () => {
  let agent: AgentProcess;

  beforeAll(async () => {
    agent = await follow(
      ['--filter-transactions'],
      (output) =>
        output.includes(`are followed in process ${goFollowed.child.pid} alone`) &&
        output.includes(`in process ${tlsFollowed.child.pid} alone`),
    );
  }, 120_000);

  afterAll(() => agent?.stop());

  it('puts its Go probes into the followed server alone, not into another running the same file', () => {
    expectFollowedAlone(agent, goFollowed, goOther);
  });

  it('puts its TLS probes into the followed process alone, not into another mapping the same libssl', () => {
    expectFollowedAlone(agent, tlsFollowed, tlsOther);
  });

  it("runs none of its programs for the Go server and the TLS exchanges it does not follow, and its Go programs for the followed server's requests", async () => {
    const before = uprobeRuns(agent);
    await get(goOther.port, REQUESTS);
    for (let i = 0; i < REQUESTS / 4; i++)
      execFileSync('curl', ['-sk', '-o', '/dev/null', `https://127.0.0.1:${tlsOther.port}/`]);
    const between = uprobeRuns(agent);
    const unfollowed = { go: between.go - before.go, tls: between.tls - before.tls };
    await get(goFollowed.port, REQUESTS);
    const followed = uprobeRuns(agent).go - between.go;
    expect({ unfollowed, followedAtLeast: followed >= REQUESTS }).toEqual({
      unfollowed: { go: 0, tls: 0 },
      followedAtLeast: true,
    });
  });
});

it("keeps its probes on every process when another process's transaction can be stored (no --filter-transactions)", async () => {
  const agent = await follow([], (output) => output.includes(`goroutines of ${binary} (`));
  try {
    const at = sites(agent, goFollowed, goOther);
    expect(at.followed.length).toBeGreaterThan(0);
    expect([...at.followed, ...at.otherAll].filter((b) => b !== INT3)).toEqual([]);
  } finally {
    await agent.stop();
  }
}, 120_000);
