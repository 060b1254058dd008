/**
 * Issue 49 end to end on the real kernel: a Python program blocked in a pipe write() while the
 * agent queues its Python hook into it (the hook's ptrace interrupts the write, the kernel restarts
 * it). The recording holds the program's writes, no more (no phantom ERESTARTSYS call), and counts
 * the interruption as the agent's; the incident exported from it replays with `replay --exec`
 * without a shortfall (every recorded byte carried by the build's calls).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import type { ExecReport } from '../support/exec/exec-report';
import { kreplay, replayIncident } from '../support/exec/kreplay-run';
import { hookableEnv, pythonHookLine } from '../support/request-accuracy';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const WRITER = join(__dirname, '..', 'support', 'blocked-pipe-writer.py');
const WRITES = 13;
const SIZE = 65536;
const SYS_WRITE = 1;
const TXN = `restart-${process.pid}`;

const dir = useTempDir('kreplay-restart-');
let cgroup: TestCgroup;
let agent: AgentProcess | null = null;
let daemon: Daemon | null = null;
/** the writer's shell: its stdin, held open by this process, is what lets its pipe's reader wait */
let program: ChildProcess | null = null;

beforeAll(() => {
  cgroup = createCgroup(`kreplay-restart-${process.pid}`);
});

afterAll(async () => {
  // a failed test leaves the writer blocked: ending the reader's stdin lets it drain and all exit
  program?.stdin?.destroy();
  await daemon?.close();
  await agent?.stop();
  cgroup?.remove();
});

/**
 * The writer, tagged with txn ('-': not), its pid and count to `output`, its stdout a pipe whose
 * reader waits for a line or the end of this shell's stdin before it drains it.
 */
const writer = (txn: string, output: string) => [
  '/bin/sh',
  '-c',
  'exec 3<&0; python3 "$0" "$1" "$2" </dev/null | { read -r go <&3; cat >/dev/null; }',
  WRITER,
  txn,
  output,
];

/** A counter of the agent's metrics. */
async function metric(url: string, name: string): Promise<number> {
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(await (await fetch(url)).text());
  return m ? Number(m[1]) : NaN;
}

interface StoredWrite {
  target: string | null;
  ret: number;
  bytes: number;
}

it('a write the Python hook interrupted is recorded once, and its incident replays without a shortfall', async () => {
  const data = join(dir.path, 'data');
  agent = await startAgent([
    '--data-dir',
    data,
    '--node',
    'restart',
    '--cgroup-id',
    String(cgroup.id),
    // the writer serves nothing: the default scope would never hook it
    '--hook-include',
    `cgroup-id:${cgroup.id}`,
    '--metrics-listen',
    '127.0.0.1:0',
  ]);
  const metricsUrl = /serving metrics url=(\S+)/.exec(agent.output())![1]!;
  const output = join(dir.path, 'writer.out');
  // started outside the agent's cgroup: its marker gives its calls a context, so the capture sees
  // them all, and the hook only goes in once it is in the cgroup, moved there while it is blocked
  // in its second write
  const [shell, ...args] = writer(TXN, output);
  const child = spawn(shell!, args, {
    env: hookableEnv(),
    stdio: ['pipe', 'ignore', 'inherit'],
  });
  const out = () => (existsSync(output) ? readFileSync(output, 'utf8') : '');
  program = child;
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const pid = await waitFor(() => (out().includes('\n') ? Number(out().split('\n')[0]) : undefined), {
    what: "the writer's pid",
  });
  await waitFor(
    () => (readFileSync(`/proc/${pid}/syscall`, 'utf8').startsWith(`${SYS_WRITE} 0x1 `) ? true : undefined),
    {
      what: 'the writer blocked in its write to the pipe',
    },
  );
  writeFileSync(join(cgroup.path, 'cgroup.procs'), String(pid));
  expect(await pythonHookLine(agent, pid)).toMatch(/queued the Python hook/);
  child.stdin!.end('go\n');
  expect(await exited).toBe(0);
  expect(out().trim().split('\n')).toEqual([String(pid), String(WRITES)]);
  daemon = await createDaemon({ dataDir: data, log: silentLogger });
  const url = daemon.url;
  const pipeWrites = async () => {
    const res = await fetch(`${url}/api/events?transaction_id=${TXN}&event_type=sys_write&limit=1000`);
    return ((await res.json()) as { events: StoredWrite[] }).events.filter((w) => w.target === 'pipe');
  };
  await waitFor(async () => ((await pipeWrites()).length >= WRITES ? true : undefined), {
    what: "the writer's pipe writes stored",
  });
  // the program's writes, each whole: none with a restart code
  expect((await pipeWrites()).map((w) => [w.ret, w.bytes])).toEqual(
    Array.from({ length: WRITES }, () => [SIZE, SIZE]),
  );

  // the hook's ptrace interrupted the write: the kernel restarted it, and the agent says it did that
  expect(await metric(metricsUrl, 'kreplay_agent_hook_interrupted_calls_total')).toBeGreaterThanOrEqual(1);
  expect(await metric(metricsUrl, 'kreplay_agent_restarted_calls_total')).toBeGreaterThanOrEqual(1);

  const incident = join(dir.path, 'restart.kri');
  const exported = await kreplay(['export', TXN, '--format', 'incident', '-o', incident, '--server', url])
    .done;
  expect(exported.status).toBe(0);
  await daemon.close();
  daemon = null;
  const stopped = await agent.stop();
  // (what it said last, when it did not stop cleanly)
  expect([stopped, stopped === 0 ? '' : agent.output().slice(-3000)]).toEqual([0, '']);
  agent = null;

  const report = join(dir.path, 'replay.json');
  const replay = await replayIncident(incident, report, writer('-', output)).done;
  // a phantom call in the recording would be 64 KiB the build never writes
  expect(replay.stderr).not.toMatch(/warning/);
  expect(replay.status).toBe(0);
  const rows = (JSON.parse(readFileSync(report, 'utf8')) as ExecReport).targets.filter(
    (r) => r.call === 'write' && r.target === 'pipe',
  );
  expect(rows.map((r) => [r.recorded_calls, r.held, r.shortfall])).toEqual([[WRITES, true, null]]);
});
