/**
 * How many times the agent's Go uprobes run (issue 46): each hit is a breakpoint trap in the followed
 * program plus its BPF program. A goroutine created costs one hit (newproc1's CALL casgstatus, the
 * creator read from the runtime: the M's curg, the new g's gopc, at offsets from the binary's DWARF),
 * not two (newproc1's entry too); a select's or non-blocking receive (net/http's context.WithCancel
 * makes one a request) costs none; a blocking receive still costs its two (its start and end: the
 * channel hand-off). The counts are the kernel's own (bpf_stats run_cnt of the agent's programs),
 * exact, for a real Go program started the ordinary way that creates goroutines and receives on
 * command. A copy built without DWARF (`-ldflags=-w`) keeps newproc1's entry probe, and the agent
 * says so.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nativeAddon } from '../../core/native/addon';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { buildGo } from '../support/go-build';
import { listUprobes, programsById } from '../support/uprobes';
import { waitFor } from '../support/wait';

const SPAWNER = join(__dirname, '..', 'support', 'runtimes', 'go-spawner.go');
const N = 50;

interface Spawner {
  child: ChildProcess;
  binary: string;
  /** sends one command and resolves once the program has done it */
  run(command: string): Promise<void>;
}

let dir: string;
let stats: number;
let agent: AgentProcess;
let withDwarf: Spawner;
let noDwarf: Spawner;

async function start(binary: string): Promise<Spawner> {
  const child = spawn(binary, [], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  await waitFor(() => out.includes('ready\n'), 30_000);
  return {
    child,
    binary,
    async run(command) {
      const before = out.split('done\n').length;
      child.stdin!.write(`${command}\n`);
      await waitFor(() => out.split('done\n').length > before, 30_000);
    },
  };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-go-runs-'));
  stats = nativeAddon().enableBpfStats();
  withDwarf = await start(buildGo(SPAWNER, join(dir, 'spawner')));
  noDwarf = await start(buildGo(SPAWNER, join(dir, 'spawner-no-dwarf'), 'no-dwarf'));
  agent = await startAgent([
    ...['--data-dir', join(dir, 'data'), '--node', 'runs', '--no-python-hook', '--filter-transactions'],
    ...['--pid', String(withDwarf.child.pid), '--pid', String(noDwarf.child.pid)],
  ]);
  await waitFor(
    () => [withDwarf, noDwarf].every((s) => agent.output().includes(`goroutines of ${s.binary} (`)),
    { timeoutMs: 90_000, what: () => agent.output() },
  );
}, 180_000);

afterAll(async () => {
  withDwarf?.child.kill('SIGKILL');
  noDwarf?.child.kill('SIGKILL');
  await agent?.stop();
  if (stats !== undefined) closeSync(stats);
  rmSync(dir, { recursive: true, force: true });
});

/** The run counts of the agent's programs probing the spawner's binary, by program name. */
function runs(s: Spawner): Map<string, number> {
  const programs = programsById();
  const ids = new Set(
    listUprobes()
      .filter(
        (p) =>
          p.pid === agent.child.pid && (p.filename === s.binary || p.filename === `/proc/${s.child.pid}/exe`),
      )
      .map((p) => p.progId),
  );
  return new Map([...ids].map((id) => [programs.get(id)!.name, programs.get(id)!.runs]));
}

/** The runs a command costs, by program (those that ran), the program's other threads idle meanwhile. */
async function cost(spawner: Spawner, command: string): Promise<Record<string, number>> {
  const before = runs(spawner);
  await spawner.run(command);
  const after = runs(spawner);
  return Object.fromEntries(
    [...after].map(([name, n]) => [name, n - (before.get(name) ?? 0)]).filter(([, n]) => n !== 0),
  );
}

it('runs one probe per goroutine created, none per non-blocking receive, two per blocking receive', async () => {
  const spawned = await cost(withDwarf, `spawn ${N}`);
  const polled = await cost(withDwarf, `poll ${N}`);
  const received = await cost(withDwarf, `recv ${N}`);
  expect({ spawned, polled, received }).toEqual({
    spawned: { go_newproc1_runnable: N },
    polled: {},
    received: { go_chansend: N, go_chanrecv: N, go_chanrecv1_ret: N },
  });
}, 60_000);

it("probes newproc1's entry too where the binary has no DWARF to read the creator's place from, and says so", async () => {
  const line = agent
    .output()
    .split('\n')
    .find((l) => l.includes(`goroutines of ${noDwarf.binary} (`));
  expect({ spawned: await cost(noDwarf, `spawn ${N}`), line }).toEqual({
    spawned: { go_newproc1: N, go_newproc1_runnable: N },
    line: expect.stringContaining(
      "no DWARF to find a goroutine's creator in: newproc1's entry is probed too",
    ),
  });
}, 60_000);
