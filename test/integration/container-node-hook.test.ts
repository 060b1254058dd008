/**
 * The Node hook across network namespaces (real kernel, rootful podman with runc): a Node server
 * in a container, started the ordinary way before the agent, is hooked through its inspector on
 * the container's own 127.0.0.1 (entered by a thread of the agent's) and attributed exactly at 1,
 * 8 and 64 concurrent requests; the inspector is closed again; and while it is open an intruder in
 * the container's network namespace (uid 65534, polling every way to loopback) gets no session:
 * its attempts are refused by the guard there, counted and logged.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { namespaceListening, processListening } from '../../agent/runtimes/node/listening-sockets';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { startPoller } from '../support/inspector-poller';
import { buildImage, PINNED_NODE, usePodman, type Container } from '../support/podman';
import { httpLoad, nodeHookLine, scoreWrites, writesUnder } from '../support/request-accuracy';
import { storedCounter } from '../support/store-rows';
import { waitFor } from '../support/wait';

const SUPPORT = join(__dirname, '..', 'support');
const INSPECTOR_PORT = 9229;
const REQUESTS = 128;
/** where the server writes, in the container; a host directory mounted there, so the store names the host's path */
const OUT = '/srv/out';

const pods = usePodman('kreplay-ctrnode');
let dir: string;
let store: string;
let agent: AgentProcess | undefined;
let server: Container;
const children: ChildProcess[] = [];

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await agent?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

(pods.skip ? describe.skip : describe)('the Node hook in a container (real kernel, podman)', () => {
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kreplay-ctrnode-'));
    store = join(dir, 'data', 'node.db');
    mkdirSync(join(dir, 'out'));
    const image = buildImage({
      name: 'node-server',
      packages: ['libstdc++6'],
      files: [
        { from: PINNED_NODE, to: '/usr/local/bin/node' },
        { from: join(SUPPORT, 'runtimes', 'node-server.js'), to: '/srv/node-server.js' },
      ],
    });
    // its upstream beside it on the container's loopback (opted out: one server hooked), then the
    // server itself as the container's first process, reached on the bridge
    const upstream = `require('http').createServer((q, s) => s.end('upstream')).listen(9000, '127.0.0.1')`;
    server = pods.run({
      image,
      name: 'server',
      extraArgs: ['--volume', `${join(dir, 'out')}:${OUT}`],
      command: [
        'sh',
        '-c',
        `mkdir -p ${OUT} && KREPLAY_NODE_HOOK=off node -e "${upstream}" & exec node /srv/node-server.js ${OUT} 9000 8080 0.0.0.0`,
      ],
    });
  });

  it('hooks a Node server in its own network namespace and attributes it exactly at 1, 8 and 64, an intruder there refused', async () => {
    await waitFor(() => processListening(server.pid).some((s) => s.port === 8080), {
      what: 'the containerised server listening',
    });
    // the intruder: in the container's network namespace, another user, polling from before the signal
    const poller = await startPoller(INSPECTOR_PORT, ['nsenter', `--net=/proc/${server.pid}/ns/net`, '--']);
    children.push(poller.child);

    agent = await startAgent([
      '--data-dir',
      join(dir, 'data'),
      '--node',
      'node',
      '--cgroup-id',
      String(server.cgroupId),
    ]);
    expect(await nodeHookLine(agent, server.pid)).toMatch(/hooked a Node process/);
    // closed again: nothing listens on the inspector's port in the container
    await waitFor(() => !namespaceListening(server.pid).some((s) => s.port === INSPECTOR_PORT), {
      what: "the container's inspector closed",
    });

    for (const level of [1, 8, 64]) {
      const ids = Array.from({ length: REQUESTS }, (_, i) => `c${level}-${i}`);
      await httpLoad(8080, ids, level, { host: server.ip, answer: 'ok' });
      const score = scoreWrites(
        await writesUnder(store, join(dir, 'out'), `c${level}-`, REQUESTS * 2),
        ids,
        2,
      );
      process.stdout.write(`container node at ${level}: ${JSON.stringify(score)} of ${REQUESTS} requests\n`);
      expect({ level, wrong: score.wrong, missing: score.missing, none: score.none }).toEqual({
        level,
        wrong: 0,
        missing: 0,
        none: 0,
      });
    }

    const counts = await poller.stop();
    process.stdout.write(`poller in the container's namespace: ${JSON.stringify(counts)}\n`);
    expect(counts.sessions).toBe(0);
    expect(counts.lists).toBe(0);
    expect(counts.refused).toBeGreaterThan(0);
    expect(agent.output()).toMatch(
      new RegExp(`refused a connection to a Node inspector kreplay opened.* pid=${poller.child.pid}\\b`),
    );
    await waitFor(() => storedCounter(store, 'node_hook_intrusions') >= (counts.refused ?? 0) || undefined, {
      what: 'the intrusions counted in the store',
    });
  }, 240_000);
});
