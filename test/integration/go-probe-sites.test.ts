/**
 * Where the agent's Go uprobes sit in a real net/http server's binary (issue 46). A uprobe on an
 * instruction the kernel cannot emulate is single-stepped out of line: a #DB trap per hit, which a
 * virtual machine turns into an exit to its hypervisor, tens of µs a hit. The entry probes of the
 * functions a request runs (runtime.newproc1, chansend, chanrecv) sit on their stack check's JBE,
 * which the kernel emulates, not on the CMP or LEA at their entry; a receive's end is looked at in
 * the blocking receives (runtime.chanrecv1, chanrecv2), whose RETs no select or non-blocking receive
 * runs (net/http's context.WithCancel makes one a request), not at chanrecv's own RETs. Read
 * from the kernel's own list of the agent's probes (bpftool perf) and the binary's bytes at each
 * probe's offset.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, readSync, closeSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { buildGo } from '../support/go-build';
import { waitFor } from '../support/wait';

const SERVER = join(__dirname, '..', 'support', 'runtimes', 'append-server.go');
const ENTRY_PROBES = ['go_newproc1', 'go_chansend', 'go_chanrecv'];

let dir: string;
let server: ChildProcess;
let agent: AgentProcess;
let binary: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-go-sites-'));
  binary = buildGo(SERVER, join(dir, 'append-server'));
  server = spawn(binary, [join(dir, 'lines')], { stdio: ['ignore', 'pipe', 'ignore'] });
  await new Promise((resolve) => server.stdout!.once('data', resolve));
  agent = await startAgent(['--data-dir', join(dir, 'data'), '--node', 'sites', '--pid', String(server.pid)]);
  await waitFor(() => agent.output().includes(`goroutines of ${binary} (`), 90_000);
}, 180_000);

afterAll(async () => {
  server?.kill('SIGKILL');
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The agent's uprobes by program name: the file and offset of each. */
function agentUprobes(): Map<string, { filename: string; offset: number }[]> {
  const perf = JSON.parse(execFileSync('bpftool', ['-j', 'perf', 'show']).toString()) as {
    pid: number;
    prog_id: number;
    fd_type?: string;
    filename?: string;
    offset?: number;
  }[];
  const names = new Map(
    (
      JSON.parse(execFileSync('bpftool', ['-j', 'prog', 'show']).toString()) as {
        id: number;
        name?: string;
      }[]
    ).map((p) => [p.id, p.name ?? '']),
  );
  const byName = new Map<string, { filename: string; offset: number }[]>();
  for (const p of perf) {
    if (p.pid !== agent.child.pid || p.fd_type !== 'uprobe' || p.filename === undefined) continue;
    const name = names.get(p.prog_id) ?? '';
    byName.set(name, [...(byName.get(name) ?? []), { filename: p.filename, offset: p.offset ?? 0 }]);
  }
  return byName;
}

function bytesAt(file: string, offset: number, length: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.alloc(length);
    readSync(fd, buf, 0, length, offset);
    return buf;
  } finally {
    closeSync(fd);
  }
}

/** JBE rel8 (76) or rel32 (0F 86): a conditional jump, which the kernel emulates. */
const isJbe = (b: Buffer) => b[0] === 0x76 || (b[0] === 0x0f && b[1] === 0x86);

/** The agent's probes of program `name` in the server's binary. */
const inServer = (probes: ReturnType<typeof agentUprobes>, name: string) =>
  (probes.get(name) ?? []).filter((p) => p.filename === binary || p.filename === `/proc/${server.pid}/exe`);

it("looks at a receive's end in the blocking receives (chanrecv1, chanrecv2), not in chanrecv, which every select runs", () => {
  const probes = agentUprobes();
  const returns = inServer(probes, 'go_chanrecv1_ret').map((p) => bytesAt(p.filename, p.offset, 1)[0]);
  // the server's binary has chanrecv1 alone (one RET), and chanrecv's own RETs are not probed
  expect({ returns, inChanrecv: inServer(probes, 'go_chanrecv_ret').length }).toEqual({
    returns: [0xc3],
    inChanrecv: 0,
  });
});

it("puts each entry probe of the request path on its function's stack-check jump, which the kernel emulates", () => {
  const probes = agentUprobes();
  const sites = ENTRY_PROBES.map((name) => {
    const at = inServer(probes, name);
    return [name, at.length, at.every((p) => isJbe(bytesAt(p.filename, p.offset, 2)))];
  });
  expect(sites).toEqual(ENTRY_PROBES.map((name) => [name, 1, true]));
});
