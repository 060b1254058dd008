/**
 * The agent as a container (real kernel, rootful podman with runc): `make image` builds the OCI
 * image offline, and the agent in it, run the way docs/install.md says (the host's pid namespace,
 * the named capabilities and no others, bpffs, tracefs, BTF and the cgroup hierarchies mounted,
 * its store on the host),
 * records a host program's writes exactly: every one, with the host's pid, and no other's.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RecordType } from '../../core/model';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { kreplayImage, usePodman } from '../support/podman';
import { readStoredEvents } from '../support/store-rows';
import { waitFor } from '../support/wait';

const FILES = 25;

/** How docs/install.md runs the agent's image (and deploy/kubernetes/agent-daemonset.yaml). */
const AGENT_IMAGE_FLAGS = [
  '--pid=host',
  '--cap-drop=ALL',
  '--cap-add=BPF,PERFMON,NET_ADMIN,DAC_READ_SEARCH,SYS_PTRACE,KILL,SYS_ADMIN',
  '--volume=/sys/fs/bpf:/sys/fs/bpf',
  '--volume=/sys/kernel/tracing:/sys/kernel/tracing',
  '--volume=/sys/kernel/btf:/sys/kernel/btf:ro',
  // the host's cgroup hierarchies: the Node inspector guard attaches to the cgroup v2 root
  '--volume=/sys/fs/cgroup:/sys/fs/cgroup:ro',
];

const pods = usePodman('kreplay-agentimg');
let dir: string;
let cgroup: TestCgroup | undefined;

afterAll(() => {
  cgroup?.remove();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

(pods.skip ? describe.skip : describe)("the agent's image (real kernel, podman)", () => {
  it('runs the agent on the host (--pid=host) and records a host program exactly', async () => {
    dir = mkdtempSync(join(tmpdir(), 'kreplay-agentimg-'));
    const data = join(dir, 'data');
    const out = join(dir, 'out');
    mkdirSync(data);
    mkdirSync(out);
    cgroup = createCgroup(`kreplay-agentimg-${process.pid}`);
    const agent = pods.run({
      image: kreplayImage(),
      name: 'agent',
      extraArgs: [...AGENT_IMAGE_FLAGS, `--volume=${data}:/var/lib/kreplay`],
      command: [
        'agent',
        '--data-dir=/var/lib/kreplay',
        '--node=img',
        `--cgroup-id=${cgroup.id}`,
        '--status-interval=1',
        '--log-format=text',
      ],
    });
    await waitFor(() => / capturing /.test(agent.logs()) || undefined, {
      timeoutMs: 60_000,
      what: () => `the agent in its image capturing:\n${agent.logs()}`,
    });

    // the host program: a shell in the test's cgroup writing FILES files, then exiting
    const writer = spawn(
      '/bin/sh',
      ['-c', `${cgroup.enter} sh -c 'for i in $(seq 1 ${FILES}); do echo "line $i" > ${out}/img-$i; done'`],
      { stdio: 'ignore' },
    );
    const writerPid = writer.pid!;
    await new Promise((resolve) => writer.once('exit', resolve));
    const where = `e.type = ${RecordType.SysWrite} AND t.value LIKE '${out}/img-%'`;
    const rows = await waitFor(
      () => {
        const stored = readStoredEvents(join(data, 'img.db'), where);
        return stored.length >= FILES && stored;
      },
      { timeoutMs: 30_000, what: `the ${FILES} writes stored:\n${agent.logs().slice(-3000)}` },
    );
    expect(rows.map((r) => r.target).sort()).toEqual(
      Array.from({ length: FILES }, (_, i) => `${out}/img-${i + 1}`).sort(),
    );
    // the host's pid (the agent shares the host's pid namespace), the bytes each echo wrote
    expect(new Set(rows.map((r) => r.pid))).toEqual(new Set([writerPid]));
    expect(rows.map((r) => r.bytes)).toEqual(rows.map((r) => `line ${r.target!.split('-').pop()}\n`.length));
    expect(agent.logs()).not.toMatch(/ (ERROR|FATAL) /);
    // every part loaded: the inspector guard too (no "no Node process is hooked")
    expect(agent.logs()).not.toMatch(/no Node process is hooked/);
    // it stops cleanly at SIGTERM, as `podman stop` sends it
    expect(agent.stop(30)).toBe(0);
  }, 600_000);
});
