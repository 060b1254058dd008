/**
 * The JVM hook (agent/runtimes/jvm/) on unmodified Java servers started the ordinary way with
 * Debian's OpenJDK 17 (real kernel, real agent): the agent loads the hook by HotSpot's dynamic
 * attach into each JVM its filters include, started before it; the hook tells the kernel which
 * request each handler serves and hands its unit to the work it gives java.util.concurrent.
 * Ground truth: each request names its files by its x-request-id. A JVM the hook must not enter
 * (attach disabled, opted out) is refused and counted, and its writes are never another request's.
 * One JVM per case: a JVM's start is slow on two cores.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, serverInCgroup, type TestCgroup } from '../support/cgroup';
import {
  hookableEnv,
  httpLoad,
  jvmHookLine,
  scoreWrites,
  writesUnder,
  type Accuracy,
} from '../support/request-accuracy';
import { waitFor } from '../support/wait';

const JAVA = '/usr/bin/java';
const POOL_SERVER = join(__dirname, '..', 'support', 'runtimes', 'JvmPoolServer.java');
const TOMCAT_SERVLETS = join(__dirname, '..', 'support', 'runtimes', 'TomcatServlets.java');
const TOMCAT_SERVLET_API = '/usr/share/tomcat10/lib/servlet-api.jar';
const CATALINA = '/usr/share/tomcat10/bin/catalina.sh';
const JETTY_SERVER = join(__dirname, '..', 'support', 'runtimes', 'JettyPoolServer.java');
/** Debian's Jetty 9 (libjetty9-java) and the javax servlet API it serves */
const JETTY_CLASSPATH = ['server', 'servlet', 'http', 'io', 'util', 'security']
  .map((jar) => `/usr/share/java/jetty9-${jar}.jar`)
  .concat('/usr/share/java/servlet-api-4.0.1.jar')
  .join(':');
const NETTY_SERVER = join(__dirname, '..', 'support', 'runtimes', 'NettyServer.java');
/** Debian's Netty 4.1 (libnetty-java): its netty-all.jar holds no classes, the modules' jars do */
const NETTY_CLASSPATH = ['common', 'buffer', 'transport', 'codec', 'codec-http']
  .map((jar) => `/usr/share/java/netty-${jar}.jar`)
  .join(':');
/** the files each request of JvmPoolServer writes: its handler's, a pool's, CompletableFuture's, a fork-join pool's, a scheduled one */
const KINDS = ['handler', 'pool', 'async', 'fj', 'later'];
const FILES = KINDS.length;
const PER_LEVEL = 256;

let dir: string;
let store: string;
let cgroup: TestCgroup;
let agent: AgentProcess;
let metricsUrl: string;
let upstream: Server;
let upstreamPort: number;
const children: ChildProcess[] = [];

interface Started {
  child: ChildProcess;
  pid: number;
  port: number;
}

/** JvmPoolServer writing under a directory of its own, hookable unless `env` says otherwise; `options`: the JVM's. */
async function poolServer(
  name: string,
  options: string[] = [],
  env = hookableEnv(),
): Promise<Started & { out: string }> {
  const out = join(dir, name);
  mkdirSync(out);
  const { child, port } = await serverInCgroup(
    cgroup,
    JAVA,
    [...options, POOL_SERVER, out, String(upstreamPort)],
    { env, children },
  );
  return { child, pid: child.pid!, port, out };
}

/** A Java program `source` on `classpath`, hookable, writing under a directory of its own (its argument): prints its port. */
async function javaServer(
  name: string,
  classpath: string,
  source: string,
): Promise<Started & { out: string }> {
  const out = join(dir, name);
  mkdirSync(out);
  const { child, port } = await serverInCgroup(cgroup, JAVA, ['-cp', classpath, source, out], {
    env: hookableEnv(),
    children,
  });
  return { child, pid: child.pid!, port, out };
}

const formatScore = (s: Accuracy) => `${s.correct}/${s.wrong}/${s.none}/${s.missing}`;

/** Sends PER_LEVEL requests `level` at a time to `path`, each answered right, and scores their `kinds` of writes, all and by kind. */
async function measure(
  server: Started & { out: string },
  name: string,
  level: number,
  { path = '/', kinds = KINDS }: { path?: string; kinds?: string[] } = {},
): Promise<Accuracy & { byKind: Record<string, Accuracy> }> {
  const ids = Array.from({ length: PER_LEVEL }, (_, i) => `${name}-c${level}-r${i}`);
  await httpLoad(server.port, ids, level, { answer: 'ok', path });
  const rows = await writesUnder(store, server.out, `${name}-c${level}-`, PER_LEVEL * kinds.length);
  const s = scoreWrites(rows, ids, kinds.length);
  const byKind: Record<string, Accuracy> = {};
  for (const kind of kinds)
    byKind[kind] = scoreWrites(
      rows.filter((e) => e.target!.endsWith(`.${kind}`)),
      ids,
      1,
    );
  const each = kinds.map((k) => `${k} ${formatScore(byKind[k]!)}`).join(', ');
  process.stdout.write(
    `${name} at ${level} concurrent, correct/wrong/none/missing: ${formatScore(s)} (${each})\n`,
  );
  return { ...s, byKind };
}

/** The goal: at least 99.9% correct, none wrong, none missing. */
function expectGoal({ correct, wrong, none, missing }: Accuracy, files = FILES): void {
  const s = { correct, wrong, none, missing };
  const total = PER_LEVEL * files;
  const goal = s.correct >= 0.999 * total && s.wrong === 0 && s.missing === 0;
  if (!goal) process.stdout.write(`agent:\n${agent.output().split('\n').slice(-6).join('\n')}\n`);
  expect({ ...s, goal }).toEqual({ ...s, goal: true });
}

/** Sends the requests `ids` pipelined, in one write on one connection: resolves once each is answered. */
function pipelined(port: number, ids: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () =>
      socket.write(
        ids.map((id) => `GET / HTTP/1.1\r\nhost: localhost\r\nx-request-id: ${id}\r\n\r\n`).join(''),
      ),
    );
    let got = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      got += chunk;
      if (got.split('\r\n\r\nok').length > ids.length) {
        socket.destroy();
        resolve();
      }
    });
    socket.on('error', reject);
  });
}

let early: Started & { out: string };

/** The agent's arguments: the test's store, its servers' cgroup. */
const agentArgs = (): string[] => [
  '--data-dir',
  join(dir, 'data'),
  '--node',
  'jvm',
  '--cgroup-id',
  String(cgroup.id),
];

/** A port free now (the kernel's pick, closed again). */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Debian's Tomcat 10 run the ordinary way (catalina.sh run) on a CATALINA_BASE of the test's own,
 * serving TomcatServlets as its ROOT application on a free port: resolves once it answers.
 */
async function startTomcat(): Promise<Started & { out: string }> {
  const base = join(dir, 'tomcat');
  const out = join(dir, 'tomcat-out');
  const classes = join(base, 'webapps', 'ROOT', 'WEB-INF', 'classes');
  for (const d of ['conf', 'logs', 'temp', 'work', out, classes])
    mkdirSync(d.startsWith('/') ? d : join(base, d), { recursive: true });
  copyFileSync('/etc/tomcat10/web.xml', join(base, 'conf', 'web.xml'));
  const port = await freePort();
  writeFileSync(
    join(base, 'conf', 'server.xml'),
    `<Server port="-1" shutdown="SHUTDOWN"><Service name="Catalina">
  <Connector port="${port}" address="127.0.0.1" protocol="HTTP/1.1" maxThreads="16"/>
  <Engine name="Catalina" defaultHost="localhost"><Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false"/></Engine>
</Service></Server>\n`,
  );
  writeFileSync(
    join(base, 'webapps', 'ROOT', 'WEB-INF', 'web.xml'),
    `<web-app xmlns="https://jakarta.ee/xml/ns/jakartaee" version="5.0" metadata-complete="true">
  <context-param><param-name>out</param-name><param-value>${out}</param-value></context-param>
  <servlet><servlet-name>pool</servlet-name><servlet-class>TomcatServlets$Pool</servlet-class></servlet>
  <servlet><servlet-name>async</servlet-name><servlet-class>TomcatServlets$Async</servlet-class><async-supported>true</async-supported></servlet>
  <servlet-mapping><servlet-name>pool</servlet-name><url-pattern>/pool</url-pattern></servlet-mapping>
  <servlet-mapping><servlet-name>async</servlet-name><url-pattern>/async</url-pattern></servlet-mapping>
</web-app>\n`,
  );
  await promisify(execFile)('/usr/bin/javac', [
    '-nowarn',
    '-cp',
    TOMCAT_SERVLET_API,
    '-d',
    classes,
    TOMCAT_SERVLETS,
  ]);
  // the shell prints the port, then becomes Tomcat's JVM
  const { child } = await serverInCgroup(
    cgroup,
    '/bin/sh',
    ['-c', `echo ${port}; exec ${CATALINA} run >/dev/null`],
    {
      env: { ...hookableEnv(), CATALINA_HOME: '/usr/share/tomcat10', CATALINA_BASE: base },
      children,
    },
  );
  await waitFor(
    () =>
      httpLoad(port, ['tomcat-up'], 1, { answer: 'ok', path: '/pool' }).then(
        () => true,
        () => false,
      ),
    { timeoutMs: 60_000, what: 'Tomcat answering' },
  );
  return { child, pid: child.pid!, port, out };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-jvm-'));
  store = join(dir, 'data', 'jvm.db');
  cgroup = createCgroup(`kreplay-jvm-${process.pid}`);
  // the upstream lives in this process, outside the servers' cgroup: its events are not captured
  upstream = createServer((_req, res) => res.end('upstream'));
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
  // a server running before the agent starts, answering a request first (its classes loaded)
  early = await poolServer('early');
  await httpLoad(early.port, ['warm'], 1, { answer: 'ok' });
  agent = await startAgent([...agentArgs(), '--metrics-listen', '127.0.0.1:0']);
  metricsUrl = /serving metrics url=(\S+)/.exec(agent.output())![1]!;
}, 120_000);

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await agent?.stop();
  upstream?.close();
  upstream?.closeAllConnections();
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe('the JVM hook on unmodified Java servers (real kernel)', () => {
  it.each([1, 8, 64, 256])(
    'HttpServer on a fixed pool of 8, HttpClient upstream, work handed to an executor, CompletableFuture, a fork-join pool and a scheduler, started before the agent: at %i concurrent, every write its request',
    async (level) => {
      expect(await jvmHookLine(agent, early.pid)).toMatch(/loaded the JVM hook/);
      expectGoal(await measure(early, 'early', level));
    },
  );

  it('Tomcat 10 started after the agent: a servlet handing work to an ExecutorService, and an async servlet (AsyncContext.start), at 1, 8, 64 and 256 concurrent: every write its request', async () => {
    const tomcat = await startTomcat();
    expect(await jvmHookLine(agent, tomcat.pid)).toMatch(/loaded the JVM hook/);
    for (const level of [1, 8, 64, 256]) {
      expectGoal(await measure(tomcat, 'servlet', level, { path: '/pool', kinds: ['handler', 'pool'] }), 2);
      expectGoal(await measure(tomcat, 'async', level, { path: '/async', kinds: ['async', 'pool'] }), 2);
    }
  });

  it('an embedded Jetty 9 server started after the agent: a servlet handing work to an ExecutorService, at 1, 8, 64 and 256 concurrent: every write its request', async () => {
    const jetty = await javaServer('jetty', JETTY_CLASSPATH, JETTY_SERVER);
    expect(await jvmHookLine(agent, jetty.pid)).toMatch(/loaded the JVM hook/);
    for (const level of [1, 8, 64, 256])
      expectGoal(await measure(jetty, 'jetty', level, { kinds: ['handler', 'pool'] }), 2);
  });

  it("a Netty 4.1 HTTP server started after the agent: two event loops multiplexing keep-alive connections, a task on the channel's event loop and one on a DefaultEventExecutorGroup, at 1, 8, 64 and 256 concurrent: every write its request", async () => {
    const netty = await javaServer('netty', NETTY_CLASSPATH, NETTY_SERVER);
    expect(await jvmHookLine(agent, netty.pid)).toMatch(/loaded the JVM hook/);
    const kinds = ['handler', 'loop', 'group'];
    for (const level of [1, 8, 64, 256])
      expectGoal(await measure(netty, 'netty', level, { kinds }), kinds.length);
    // pipelined requests (two in one segment): which one a write serves is not known once the
    // second is read before the first is answered, so the channel runs none until both are: never wrong
    const pairs = Array.from({ length: 16 }, (_, i) => [`netty-pipe-${i}-a`, `netty-pipe-${i}-b`]);
    await Promise.all(pairs.map((ids) => pipelined(netty.port, ids)));
    const ids = pairs.flat();
    const rows = await writesUnder(store, netty.out, 'netty-pipe-', ids.length * kinds.length);
    const s = scoreWrites(rows, ids, kinds.length);
    process.stdout.write(`netty pipelined, correct/wrong/none/missing: ${formatScore(s)}\n`);
    expect({ wrong: s.wrong, missing: s.missing }).toEqual({ wrong: 0, missing: 0 });
  });

  // unhooked, a JVM is left to the kernel's own rules but one: its threads inherit no request (a
  // pool thread started lazily on a request's thread would run other requests' tasks while that one
  // lives, bpf/capture/tasks.h), so its writes are none, never another request's
  it('a JVM with attach disabled, and one that opts out (KREPLAY_JVM_HOOK=off), are refused: logged, counted, every request answered, no write given to another request', async () => {
    const [disabled, optedOut] = await Promise.all([
      poolServer('disabled', ['-XX:+DisableAttachMechanism']),
      poolServer('opted-out', [], { ...hookableEnv(), KREPLAY_JVM_HOOK: 'off' }),
    ]);
    expect(await jvmHookLine(agent, disabled.pid)).toContain(
      'left a JVM process unattributed: it disables the attach mechanism (-XX:+DisableAttachMechanism)',
    );
    expect(await jvmHookLine(agent, optedOut.pid)).toContain(
      'left a JVM process unattributed: KREPLAY_JVM_HOOK=off in its environment',
    );
    for (const [server, name] of [
      [disabled, 'disabled'],
      [optedOut, 'optout'],
    ] as const) {
      const { wrong, missing } = await measure(server, name, 8);
      expect({ wrong, missing }).toEqual({ wrong: 0, missing: 0 });
    }
    const metrics = await (await fetch(metricsUrl)).text();
    // the pool threads these servers started inside a request, each counted
    expect(
      Number(
        /^kreplay_agent_context_problems_total\{kind="uninherited_jvm_thread"\} (\d+)$/m.exec(metrics)?.[1],
      ),
    ).toBeGreaterThan(0);
    const count = (outcome: string) =>
      Number(
        new RegExp(
          `^kreplay_agent_runtime_hooks_total\\{runtime="jvm",outcome="${outcome}"\\} (\\d+)$`,
          'm',
        ).exec(metrics)?.[1],
      );
    // the early server, Tomcat, Jetty and Netty
    expect({ hooked: count('hooked'), refused: count('refused'), failed: count('failed') }).toEqual({
      hooked: 4,
      refused: 2,
      failed: 0,
    });
  });

  it('a hooked JVM under a restarted agent: the hook loaded again makes its threads register anew, every write its request', async () => {
    await agent.stop();
    agent = await startAgent(agentArgs());
    expect(await jvmHookLine(agent, early.pid)).toMatch(/loaded the JVM hook/);
    expectGoal(await measure(early, 'restarted', 8));
  });
});
