/**
 * The process discovery tells Go and JVM processes (agent/runtimes/discovery): a Go server built by
 * the test (stripped: no symbol table, Go's sections still tell it) and a Java server (`java`
 * launching a source file, when a JDK is installed) are found and counted `no_hook`, each said once
 * with why, never silently; nothing is sent to them. uwsgi, which embeds CPython (its python3
 * plugin maps libpython3.11), gets the Python hook like a python3. Real agent, real kernel.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import { buildGo } from '../support/go-build';
import { hookableEnv, pythonHookLine } from '../support/request-accuracy';
import { waitFor } from '../support/wait';

const JAVA = '/usr/bin/java';
const UWSGI = '/usr/bin/uwsgi-core';
const WSGI_APP =
  'def application(env, start):\n    start("200 OK", [("Content-Type", "text/plain")])\n    return [b"ok"]\n';
const GO_SERVER = `package main

import (
	"fmt"
	"net"
	"time"
)

func main() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	time.Sleep(120 * time.Second)
}
`;
const JAVA_SERVER = `import java.net.ServerSocket;

public class Server {
  public static void main(String[] args) throws Exception {
    ServerSocket s = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
    System.out.println(s.getLocalPort());
    Thread.sleep(120000);
  }
}
`;

let dir: string;
let cgroup: TestCgroup;
let agent: AgentProcess | undefined;
const children: ChildProcess[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-discovery-'));
  cgroup = createCgroup(`kreplay-discovery-${process.pid}`);
});

afterAll(async () => {
  await agent?.stop();
  for (const c of children) c.kill('SIGKILL');
  try {
    cgroup.remove();
  } catch {
    // a straggler still exiting
  }
  rmSync(dir, { recursive: true, force: true });
});

/** What the agent's line about process `pid` starting with `start` says. */
function lineOf(pid: number, start: string): Promise<string> {
  const pattern = new RegExp(`^.*\\[agent/runtime-hook\\] (${start}.*) pid=${pid}\\b.*$`, 'm');
  return waitFor(() => pattern.exec(agent!.output())?.[1], { timeoutMs: 30_000, what: `the line of ${pid}` });
}

describe('runtime discovery (real agent)', () => {
  it('finds a stripped Go server and counts it no_hook: its uprobes follow it, no hook goes in', async () => {
    writeFileSync(join(dir, 'server.go'), GO_SERVER);
    const binary = buildGo(join(dir, 'server.go'), join(dir, 'go-server'), 'stripped');
    const go = await serverInCgroup(cgroup, binary, [], { children });
    agent = await startAgent(['--data-dir', join(dir, 'data'), '--include', `cgroup-id:${cgroup.id}`]);
    expect(await lineOf(go.child.pid!, 'no Go hook')).toBe(
      'no Go hook: Go needs none: its goroutines are followed by uprobes on its binary, which the capture logs',
    );
  });

  (existsSync(JAVA) ? it : it.skip)(
    'finds a Java server by its libjvm.so and hands it to the JVM injector (opted out here: refused)',
    async () => {
      writeFileSync(join(dir, 'Server.java'), JAVA_SERVER);
      const java = await serverInCgroup(cgroup, JAVA, [join(dir, 'Server.java')], { children });
      agent ??= await startAgent(['--data-dir', join(dir, 'data'), '--include', `cgroup-id:${cgroup.id}`]);
      // the runner's processes opt out of the JVM hook (jest.config.js): attribution-jvm hooks them
      expect(await lineOf(java.child.pid!, 'left a JVM process unattributed')).toBe(
        'left a JVM process unattributed: KREPLAY_JVM_HOOK=off in its environment',
      );
      // said once, however many scans passed (besides once out of scope while it compiled)
      const out = agent.output();
      expect(out.match(new RegExp(`unattributed: .* pid=${java.child.pid}\\b`, 'g'))).toHaveLength(1);
      expect(out.match(new RegExp(`pid=${java.child.pid}\\b`, 'g'))!.length).toBeLessThanOrEqual(2);
    },
  );
});

/** A port free now (the kernel's pick, closed again). */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

describe('runtime discovery: CPython embedded (real agent)', () => {
  it("finds uwsgi's master and workers by the libpython its plugin maps, and queues the Python hook into each", async () => {
    writeFileSync(join(dir, 'app.py'), WSGI_APP);
    const port = await freePort();
    const uwsgi = spawn(
      '/bin/sh',
      [
        '-c',
        `${cgroup.enter} "$@"`,
        'sh',
        UWSGI,
        '--plugin',
        'python3',
        '--master',
        '--workers',
        '2',
        '--http-socket',
        `127.0.0.1:${port}`,
        '--wsgi-file',
        join(dir, 'app.py'),
      ],
      { stdio: 'ignore', env: hookableEnv() },
    );
    children.push(uwsgi);
    const answer = () =>
      fetch(`http://127.0.0.1:${port}/`).then(
        (r) => r.text(),
        () => undefined,
      );
    expect(await waitFor(answer, { timeoutMs: 30_000, what: 'uwsgi answering' })).toBe('ok');
    const master = uwsgi.pid!;
    const workers = await waitFor(
      () => {
        try {
          const pids = readFileSync(`/proc/${master}/task/${master}/children`, 'utf8').trim().split(' ');
          return pids.length >= 2 ? pids.map(Number) : undefined;
        } catch {
          return undefined;
        }
      },
      { what: "uwsgi's workers" },
    );
    agent ??= await startAgent(['--data-dir', join(dir, 'data'), '--include', `cgroup-id:${cgroup.id}`]);
    for (const pid of [master, ...workers])
      expect(await pythonHookLine(agent, pid)).toMatch(/queued the Python hook/);
    // and it still serves
    expect(await answer()).toBe('ok');
  });
});

if (!existsSync(JAVA)) console.warn(`SKIPPED: the JVM case needs ${JAVA} (default-jdk-headless)`);
