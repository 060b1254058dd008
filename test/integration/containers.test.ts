/**
 * Containers under the real agent (issue 45): two podman containers (runc) of one aiohttp image,
 * each with the CRI annotations a kubelet's runtime writes, serve requests that write the same path
 * inside each. Every event of theirs carries its container's id, name, image, pod, namespace and
 * labels; the two /out/x.log are two targets (the host's paths to each file); the services are named
 * by the pod's app.kubernetes.io/name label, else the container's name; GET /api/events filters by
 * container, pod, namespace and image. The agent's live OTLP export gives each container's spans
 * a resource with its container and pod.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { SyscallEvent } from '../../core/model';
import { startAgent, type AgentProcess } from '../support/agent-process';
import {
  fetchAllPages,
  get,
  startEventsServer,
  useEventsBackends,
  type EventsServer,
} from '../support/events-http';
import { OtlpReceiver } from '../support/otlp-receiver';
import { buildImage, usePodman, type Container } from '../support/podman';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const dir = useTempDir('kreplay-containers-');
const pods = usePodman('kreplay-ctr');
const backends = useEventsBackends();
const tag = process.pid;
const namespace = `shop-${tag}`;
let agent: AgentProcess | undefined;
let server: EventsServer | undefined;
let receiver: OtlpReceiver | undefined;
const containers: Container[] = [];

afterAll(async () => {
  await server?.close();
  await agent?.stop('SIGKILL');
  await receiver?.close();
});

/** The W3C trace id a request of id `id` carries. */
const traceOf = (id: string) => createHash('md5').update(id).digest('hex');

async function request(c: Container, path: string, id: string): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${c.hostPort(8080)}${path}`, {
    headers: { 'x-request-id': id, traceparent: `00-${traceOf(id)}-00f067aa0ba902b7-01` },
  });
  expect(await res.text()).toBe('ok');
}

(pods.skip ? describe.skip : describe)('containers under the agent (real podman, runc)', () => {
  it('gives every event its container and labels, tells same-path files apart and filters by them', async () => {
    const image = buildImage({
      name: 'aiohttp',
      packages: ['python3-aiohttp'],
      files: [{ from: join(__dirname, '..', 'support', 'aiohttp-log-server.py'), to: '/srv/app.py' }],
    });
    const annotations = (pod: string, extra: Record<string, string> = {}) => ({
      'io.kubernetes.pod.name': pod,
      'io.kubernetes.pod.namespace': namespace,
      ...extra,
    });
    const run = (name: string, extra: Record<string, string>) =>
      pods.run({
        image,
        name,
        command: ['python3', '/srv/app.py', '8080'],
        annotations: annotations(`${name}-7d9f`, extra),
        publish: [8080],
      });
    const a = run('web', { 'app.kubernetes.io/name': 'shop-web' });
    const b = run('api', {});
    containers.push(a, b);
    receiver = await OtlpReceiver.start();
    agent = await startAgent([
      ...['--data-dir', dir.path, '--node', 'n', '--otlp', receiver.url],
      ...['--include', `cgroup:${a.cgroup}`, '--include', `cgroup:${b.cgroup}`],
    ]);
    // the servers listen once aiohttp has loaded
    for (const c of [a, b])
      await waitFor(
        () =>
          request(c, '/warm', 'warm').then(
            () => true,
            () => undefined,
          ),
        30_000,
      );
    for (let i = 0; i < 3; i++) await request(a, '/x', `A${tag}-${i}`);
    for (let i = 0; i < 2; i++) await request(b, '/x', `B${tag}-${i}`);

    server = await startEventsServer(dir.path);
    const url = server.url;
    const logWrites = async (query: string) =>
      (await fetchAllPages(url, `event_type=sys_write&${query}`)).filter((e) =>
        (e as SyscallEvent).target?.endsWith('/out/x.log'),
      ) as SyscallEvent[];
    const written = await waitFor(
      async () => {
        const events = await logWrites('target_kind=file');
        return events.length === 5 ? events : undefined;
      },
      {
        timeoutMs: 30_000,
        what: () => `5 writes of /out/x.log stored (agent: ${agent!.output().slice(-2000)})`,
      },
    );

    const expected = (c: Container, pod: string, labels: Record<string, string>) => ({
      id: c.id,
      runtime: 'podman',
      name: c.name,
      image: image,
      pod,
      namespace,
      labels: expect.objectContaining(labels) as unknown,
      // the server is its container's first process: pid 1 inside
      pid: 1,
    });
    const inA = expected(a, 'web-7d9f', annotations('web-7d9f', { 'app.kubernetes.io/name': 'shop-web' }));
    const inB = expected(b, 'api-7d9f', annotations('api-7d9f'));
    const byContainer = (c: Container) => written.filter((e) => e.container?.id === c.id);
    expect(byContainer(a).map((e) => e.container)).toEqual([inA, inA, inA]);
    expect(byContainer(b).map((e) => e.container)).toEqual([inB, inB]);
    // the pod's app label names A's service, B's container name B's
    expect(new Set(byContainer(a).map((e) => e.service_name))).toEqual(new Set(['shop-web']));
    expect(new Set(byContainer(b).map((e) => e.service_name))).toEqual(new Set([b.name]));
    // one path inside, two files: two targets, each the host's path to its container's file
    const targets = (events: SyscallEvent[]) => [...new Set(events.map((e) => e.target))];
    const [targetA] = targets(byContainer(a));
    const [targetB] = targets(byContainer(b));
    expect(targets(byContainer(a))).toHaveLength(1);
    expect(targets(byContainer(b))).toHaveLength(1);
    expect(targetA).not.toBe(targetB);
    expect(targetA).toMatch(/^\/.+\/out\/x\.log$/);
    // every event of the containers' processes (each server is its container's one process) carries
    // its container; other processes' events in a transaction are captured too (docs/operate.md)
    const all = await fetchAllPages(url, '');
    const ofPid = (c: Container) => all.filter((e) => e.pid === c.pid);
    expect(ofPid(a).length).toBeGreaterThan(3);
    expect(ofPid(b).length).toBeGreaterThan(2);
    expect(ofPid(a).filter((e) => e.container?.id !== a.id)).toEqual([]);
    expect(ofPid(b).filter((e) => e.container?.id !== b.id)).toEqual([]);
    const claimed = (c: Container) => all.filter((e) => e.container?.id === c.id && e.pid !== c.pid);
    expect([...claimed(a), ...claimed(b)]).toEqual([]);

    // the live OTLP export: each container's spans under a resource naming its container and pod
    const resourcesOf = async (id: string) => {
      // the container's spans (the test's own client is in the trace too, on the host)
      const spans = await waitFor(
        () => {
          const found = receiver!.spans.filter(
            (span) => span.traceId === traceOf(id) && 'container.id' in span.resource,
          );
          return found.length > 0 && found;
        },
        { timeoutMs: 30_000, what: `the container spans of ${id} exported` },
      );
      // each distinct resource once
      return [...new Map(spans.map((span) => [JSON.stringify(span.resource), span.resource])).values()];
    };
    const resource = (c: Container, service: string, pod: string) => ({
      'service.name': service,
      'host.name': 'n',
      'container.id': c.id,
      'container.name': c.name,
      'container.image.name': image,
      'container.runtime': 'podman',
      'k8s.pod.name': pod,
      'k8s.namespace.name': namespace,
    });
    expect(await resourcesOf(`A${tag}-0`)).toEqual([resource(a, 'shop-web', 'web-7d9f')]);
    expect(await resourcesOf(`B${tag}-1`)).toEqual([resource(b, b.name, 'api-7d9f')]);

    // the same answers from the node store and from ClickHouse (the agent stopped: nothing more comes)
    await agent.stop();
    for (const backend of backends) {
      const other = await startEventsServer(dir.path, backend);
      try {
        await checkFilters(other.url, backend.kind);
      } finally {
        await other.close();
      }
    }
  }, 180_000);

  async function checkFilters(url: string, backend: string): Promise<void> {
    const [a, b] = containers as [Container, Container];
    const { image } = a;
    const logWrites = async (query: string) =>
      (await fetchAllPages(url, `event_type=sys_write&${query}`)).filter((e) =>
        (e as SyscallEvent).target?.endsWith('/out/x.log'),
      ) as SyscallEvent[];
    const byContainer = (c: Container, events: SyscallEvent[]) =>
      events.filter((e) => e.container?.id === c.id);
    const written = await logWrites('');
    expect([backend, byContainer(a, written).length, byContainer(b, written).length]).toEqual([
      backend,
      3,
      2,
    ]);
    // the filters: container by name, id and short id; pod; namespace; image
    const ids = async (query: string) =>
      new Set((await fetchAllPages(url, query)).map((e) => e.container?.id));
    expect(await ids(`container=${a.name}`)).toEqual(new Set([a.id]));
    expect(await ids(`container=${b.id}`)).toEqual(new Set([b.id]));
    expect(await ids(`container=${b.id.slice(0, 12)}`)).toEqual(new Set([b.id]));
    expect(await ids('pod=web-7d9f')).toEqual(new Set([a.id]));
    expect(await ids(`namespace=${namespace}`)).toEqual(new Set([a.id, b.id]));
    expect(await ids(`image=${encodeURIComponent(image)}`)).toEqual(new Set([a.id, b.id]));
    expect(await logWrites(`pod=api-7d9f&namespace=${namespace}`)).toEqual(byContainer(b, written));
    for (const query of [
      'container=nope',
      `container=${a.id.slice(0, 11)}`,
      'pod=web',
      'namespace=shop',
      'image=x',
    ])
      expect((await fetchAllPages(url, query)).length).toBe(0);
    expect((await get(`${url}/api/events?pod=`)).status).toBe(400);
  }
});
