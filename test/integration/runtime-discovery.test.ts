/**
 * The process discovery tells Go and JVM processes (agent/runtimes/discovery): a Go server built by
 * the test (stripped: no symbol table, Go's sections still tell it) and a Java server (`java`
 * launching a source file, when a JDK is installed) are found and counted `no_hook`, each said once
 * with why, never silently; nothing is sent to them. Real agent, real kernel.
 */
import { type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import { buildGo } from '../support/go-build';
import { waitFor } from '../support/wait';

const JAVA = '/usr/bin/java';
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
    'finds a Java server by its libjvm.so and counts it no_hook',
    async () => {
      writeFileSync(join(dir, 'Server.java'), JAVA_SERVER);
      const java = await serverInCgroup(cgroup, JAVA, [join(dir, 'Server.java')], { children });
      agent ??= await startAgent(['--data-dir', join(dir, 'data'), '--include', `cgroup-id:${cgroup.id}`]);
      expect(await lineOf(java.child.pid!, 'no JVM hook')).toBe(
        'no JVM hook: kreplay has no JVM hook yet: its requests stay unattributed',
      );
      // said once, however many scans passed (besides once out of scope while it compiled)
      const out = agent.output();
      expect(out.match(new RegExp(`no JVM hook: .* pid=${java.child.pid}\\b`, 'g'))).toHaveLength(1);
      expect(out.match(new RegExp(`pid=${java.child.pid}\\b`, 'g'))!.length).toBeLessThanOrEqual(2);
    },
  );
});

if (!existsSync(JAVA)) console.warn(`SKIPPED: the JVM case needs ${JAVA} (default-jdk-headless)`);
