import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { CgroupPaths } from '../../agent/attribution/cgroup-paths';
import { containerOfCgroup } from '../../agent/attribution/container-id';
import { ContainerResolver } from '../../agent/attribution/container-resolver';
import {
  MAX_LABELS,
  MAX_STATE_BYTES,
  readContainerState,
  type RuntimeRoots,
} from '../../agent/attribution/container-state';
import { hostPathByMounts, parseMountInfo } from '../../agent/attribution/host-path';
import { ServiceResolver } from '../../agent/attribution/service-resolver';
import { CgroupSelection } from '../../agent/filter/capture-filter';
import { ProcessSelectors, type SelectedProcess } from '../../agent/filter/process-selectors';
import { formatSelector, parseHookSelector, parseSelector } from '../../agent/filter/selector';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();
const ID = 'a'.repeat(60) + '1234';
const OTHER = 'b'.repeat(64);

const roots = (): RuntimeRoots => ({
  storage: join(dir.path, 'storage'),
  storageRun: join(dir.path, 'run-storage'),
  containerd: join(dir.path, 'containerd'),
  docker: join(dir.path, 'docker'),
});

function write(path: string, text: string): void {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
}

const bundle = (storage: string, id: string) =>
  join(storage, 'overlay-containers', id, 'userdata', 'config.json');

/** What podman 4.3 writes: annotations in the bundle, the name and image in containers.json. */
function podmanContainer(id: string, name: string, annotations: Record<string, string>): void {
  write(bundle(roots().storage, id), JSON.stringify({ ociVersion: '1.0.2', annotations }));
  const list = join(roots().storage, 'overlay-containers', 'containers.json');
  write(
    list,
    JSON.stringify([
      {
        id,
        names: [name],
        image: 'f'.repeat(64),
        metadata: JSON.stringify({ 'image-name': 'localhost/shop:1', name }),
      },
    ]),
  );
}

describe('containerOfCgroup', () => {
  it.each([
    [`/libpod_parent/libpod-${ID}`, 'podman'],
    [`/machine.slice/libpod-${ID}.scope/container`, 'podman'],
    [`/system.slice/docker-${ID}.scope`, 'docker'],
    [`/docker/${ID}`, 'docker'],
    [
      `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-${ID}.scope`,
      'containerd',
    ],
    [`/kubepods.slice/kubepods-pod2.slice/crio-${ID}.scope`, 'crio'],
    [`/kubepods/besteffort/pod0f1e2d3c-aaaa-bbbb-cccc-000000000000/${ID}`, 'unknown'],
  ])('%s is a %s container', (path, runtime) => {
    expect(containerOfCgroup(path)).toEqual({ id: ID, runtime });
  });

  it.each([
    [`/machine.slice/libpod-conmon-${ID}.scope`],
    [`/kubepods.slice/crio-conmon-${ID}.scope`],
    ['/system.slice/nginx.service'],
    [`/user.slice/${ID}`],
    [`/system.slice/docker-${ID.slice(1)}.scope`],
    [`/system.slice/docker-${ID.toUpperCase()}.scope`],
    ['/'],
  ])('%s is no container', (path) => {
    expect(containerOfCgroup(path)).toBeNull();
  });

  it('takes the innermost container of a nested path', () => {
    expect(containerOfCgroup(`/system.slice/docker-${OTHER}.scope/libpod_parent/libpod-${ID}`)).toEqual({
      id: ID,
      runtime: 'podman',
    });
  });
});

describe('readContainerState', () => {
  it("reads podman's name and image from containers.json and CRI annotations from the bundle", () => {
    podmanContainer(ID, 'shop-a', {
      'io.kubernetes.pod.name': 'shop-7d9',
      'io.kubernetes.pod.namespace': 'prod',
      'app.kubernetes.io/name': 'shop',
    });
    const state = readContainerState({ id: ID, runtime: 'podman' }, roots());
    expect(state).toEqual({
      container: {
        id: ID,
        runtime: 'podman',
        name: 'shop-a',
        image: 'localhost/shop:1',
        pod: 'shop-7d9',
        namespace: 'prod',
        labels: {
          'io.kubernetes.pod.name': 'shop-7d9',
          'io.kubernetes.pod.namespace': 'prod',
          'app.kubernetes.io/name': 'shop',
        },
      },
      problem: null,
    });
  });

  it("reads containerd's CRI annotations from its bundle in any namespace", () => {
    write(
      join(roots().containerd, 'k8s.io', ID, 'config.json'),
      JSON.stringify({
        annotations: {
          'io.kubernetes.cri.container-type': 'container',
          'io.kubernetes.cri.container-name': 'api',
          'io.kubernetes.cri.image-name': 'registry.example/api:2',
          'io.kubernetes.cri.sandbox-name': 'api-5c4',
          'io.kubernetes.cri.sandbox-namespace': 'payments',
        },
      }),
    );
    mkdirSync(join(roots().containerd, 'moby'), { recursive: true });
    const { container, problem } = readContainerState({ id: ID, runtime: 'containerd' }, roots());
    expect(problem).toBeNull();
    expect(container).toMatchObject({
      name: 'api',
      image: 'registry.example/api:2',
      pod: 'api-5c4',
      namespace: 'payments',
    });
  });

  it("reads CRI-O's annotations and its labels annotation from the run root's bundle", () => {
    write(
      bundle(roots().storageRun, ID),
      JSON.stringify({
        annotations: {
          'io.kubernetes.cri-o.ImageName': 'quay.example/web:3',
          'io.kubernetes.cri-o.Labels': JSON.stringify({
            'io.kubernetes.container.name': 'web',
            'io.kubernetes.pod.name': 'web-0',
            'io.kubernetes.pod.namespace': 'shop',
          }),
        },
      }),
    );
    const { container, problem } = readContainerState({ id: ID, runtime: 'crio' }, roots());
    expect(problem).toBeNull();
    expect(container).toMatchObject({
      name: 'web',
      image: 'quay.example/web:3',
      pod: 'web-0',
      namespace: 'shop',
    });
  });

  it("reads docker's config.v2.json; a kubelet's cgroupfs path finds whichever runtime has the container", () => {
    write(
      join(roots().docker, ID, 'config.v2.json'),
      JSON.stringify({ Name: '/cache', Config: { Image: 'redis:7', Labels: { tier: 'cache' } } }),
    );
    const expected = { name: 'cache', image: 'redis:7', pod: null, labels: { tier: 'cache' } };
    expect(readContainerState({ id: ID, runtime: 'docker' }, roots()).container).toMatchObject(expected);
    expect(readContainerState({ id: ID, runtime: 'unknown' }, roots()).container).toMatchObject({
      ...expected,
      runtime: 'docker',
    });
  });

  it('gives the container by its id and says why when its state is missing, malformed or hostile', () => {
    const ref = { id: ID, runtime: 'podman' as const };
    const none = {
      id: ID,
      runtime: 'podman',
      name: null,
      image: null,
      pod: null,
      namespace: null,
      labels: {},
    };
    // missing
    expect(readContainerState(ref, roots())).toEqual({
      container: none,
      problem: expect.stringContaining('ENOENT'),
    });
    // not JSON, a JSON array, too large
    write(bundle(roots().storage, ID), '{"annotations": ');
    expect(readContainerState(ref, roots()).problem).toMatch(/config\.json: .*JSON/);
    write(bundle(roots().storage, ID), '[]');
    expect(readContainerState(ref, roots()).problem).toContain('not a JSON object');
    write(bundle(roots().storage, ID), ' '.repeat(MAX_STATE_BYTES + 1));
    expect(readContainerState(ref, roots()).problem).toContain(`more than ${MAX_STATE_BYTES}`);
    // a symlink (to a file the agent must not read for anyone) and a FIFO (that would block) are not followed or opened
    const path = bundle(roots().storage, ID);
    execFileSync('rm', ['-f', path]);
    symlinkSync('/etc/shadow', path);
    expect(readContainerState(ref, roots()).problem).toContain('ELOOP');
    execFileSync('rm', ['-f', path]);
    execFileSync('mkfifo', [path]);
    expect(readContainerState(ref, roots()).problem).toContain('not a regular file');
    // fields of the wrong type are left out
    execFileSync('rm', ['-f', path]);
    write(
      path,
      JSON.stringify({ annotations: { 'io.kubernetes.pod.name': 7, ok: 'yes', nested: { a: 'b' } } }),
    );
    expect(readContainerState(ref, roots()).container.labels).toEqual({ ok: 'yes' });
    expect(readContainerState(ref, roots()).container.pod).toBeNull();
  });

  it('keeps at most MAX_LABELS labels and says how many were left out', () => {
    const many = Object.fromEntries(Array.from({ length: MAX_LABELS + 5 }, (_, i) => [`k${i}`, 'v']));
    podmanContainer(ID, 'x', { ...many, long: 'v'.repeat(5000) });
    const { container, problem } = readContainerState({ id: ID, runtime: 'podman' }, roots());
    expect(Object.keys(container.labels)).toHaveLength(MAX_LABELS);
    expect(problem).toBe('6 labels left out (over 128 or too long)');
  });
});

describe('container service names', () => {
  function fakeProcess(pid: number, cgroupFile: string): void {
    mkdirSync(join(dir.path, 'proc', String(pid)), { recursive: true });
    writeFileSync(join(dir.path, 'proc', String(pid), 'cgroup'), cgroupFile);
  }

  it("names a container's processes by its pod's app.kubernetes.io/name, else the container name; rules come first", () => {
    podmanContainer(ID, 'shop-a', { 'app.kubernetes.io/name': 'shop' });
    write(bundle(roots().storage, OTHER), JSON.stringify({ annotations: {} }));
    const list = join(roots().storage, 'overlay-containers', 'containers.json');
    write(
      list,
      JSON.stringify([
        { id: ID, names: ['shop-a'], metadata: '{}' },
        { id: OTHER, names: ['cache-b'], metadata: '{}' },
      ]),
    );
    fakeProcess(10, `0::/libpod_parent/libpod-${ID}\n`);
    fakeProcess(11, `0::/libpod_parent/libpod-${OTHER}\n`);
    fakeProcess(12, '0::/system.slice/nginx.service\n');
    // pid 10 is pid 1 in its container (NSpid: host's, then each inner namespace's); 11's status is gone
    writeFileSync(join(dir.path, 'proc', '10', 'status'), 'Name:\tpython3\nNSpid:\t10\t1\nNStgid:\t10\t1\n');
    writeFileSync(join(dir.path, 'proc', '12', 'status'), 'Name:\tnginx\nNSpid:\t12\n');
    const problems: string[] = [];
    const containers = new ContainerResolver(roots(), (_, p) => problems.push(p));
    const r = new ServiceResolver([], new CgroupPaths(null), join(dir.path, 'proc'), containers);
    expect(r.identityOf({ pid: 10, comm: 'python3', cgroupId: 1 })).toMatchObject({
      service: 'shop',
      container: { id: ID, name: 'shop-a', pid: 1 },
    });
    expect(r.serviceOf({ pid: 11, comm: 'python3', cgroupId: 1 })).toBe('cache-b');
    expect(r.identityOf({ pid: 11, comm: 'python3', cgroupId: 1 }).container).not.toHaveProperty('pid');
    expect(r.identityOf({ pid: 12, comm: 'nginx', cgroupId: 1 })).toEqual({
      service: 'nginx',
      container: null,
    });
    expect(r.serviceOfCgroup(`/libpod_parent/libpod-${OTHER}`)).toBe('cache-b');
    const ruled = new ServiceResolver(
      [{ service: 'py', match: { comm: 'python3' } }],
      new CgroupPaths(null),
      join(dir.path, 'proc'),
      containers,
    );
    expect(ruled.serviceOf({ pid: 10, comm: 'python3', cgroupId: 1 })).toBe('py');
    expect(problems).toEqual([]);
    expect(containers.unreadableStates).toBe(0);
  });
});

describe('hostPathByMounts', () => {
  const mounts = (lines: string[]) => parseMountInfo(lines.join('\n'));
  // podman with runc: the container's root is an overlay the host has mounted at its merged dir
  const host = mounts([
    '22 1 8:1 / / rw - ext4 /dev/sda1 rw',
    '90 22 0:40 / /var/lib/containers/storage/overlay/abc/merged rw - overlay overlay rw',
    '91 22 8:1 /srv/data /mnt/data\\040dir rw - ext4 /dev/sda1 rw',
  ]);
  const inside = mounts([
    '81 53 0:40 / / rw - overlay overlay rw',
    '82 81 0:45 / /proc rw - proc proc rw',
    '83 81 8:1 /srv/data/vol /out rw - ext4 /dev/sda1 rw',
  ]);

  it("finds the host's path through the mount that holds the path", () => {
    expect(hostPathByMounts('/etc/app.conf', inside, host)).toBe(
      '/var/lib/containers/storage/overlay/abc/merged/etc/app.conf',
    );
    // a volume: the host's own filesystem, at the directory it was bound from
    expect(hostPathByMounts('/out/x.log', inside, host)).toBe('/srv/data/vol/x.log');
  });

  it('is null where the host does not reach the filesystem', () => {
    expect(hostPathByMounts('/proc/1/status', inside, host)).toBeNull();
    expect(hostPathByMounts('/x', [], host)).toBeNull();
  });
});

describe('container:, pod: and namespace: selectors', () => {
  const container = {
    id: ID,
    runtime: 'podman' as const,
    name: 'shop-a',
    image: 'localhost/shop:1',
    pod: 'shop-7d9',
    namespace: 'prod',
    labels: {},
  };
  const process = (c: typeof container | null): SelectedProcess => ({
    pid: 10,
    comm: 'python3',
    cgroupPaths: [],
    cgroupId: null,
    exe: null,
    service: 'shop',
    container: c,
  });

  it('parse, print and name a process by its container, pod or namespace', () => {
    const selectors = [
      'container:shop-a',
      `container:${ID.slice(0, 12)}`,
      'pod:shop-7d9',
      'namespace:prod',
    ].map(parseHookSelector);
    expect(selectors.map(formatSelector)).toEqual([
      'container:shop-a',
      `container:${ID.slice(0, 12)}`,
      'pod:shop-7d9',
      'namespace:prod',
    ]);
    for (const s of selectors) {
      expect(new ProcessSelectors([s]).naming(process(container))).toBe(s);
      expect(new ProcessSelectors([s]).naming(process(null))).toBeUndefined();
    }
    for (const text of [`container:${ID.slice(0, 11)}`, 'container:shop', 'pod:shop', 'namespace:pro'])
      expect(new ProcessSelectors([parseSelector(text)]).naming(process(container))).toBeUndefined();
    expect(() => parseSelector('pod:')).toThrow('"pod:" is not a filter');
  });

  it("select a container's cgroups for the kernel filter", () => {
    podmanContainer(ID, 'shop-a', { 'io.kubernetes.pod.namespace': 'prod' });
    const services = new ServiceResolver([], new CgroupPaths(null), dir.path, new ContainerResolver(roots()));
    const paths = new Map([
      [1, '/'],
      [2, `/libpod_parent/libpod-${ID}`],
      [3, `/libpod_parent/libpod-conmon-${ID}`],
      [4, '/system.slice/nginx.service'],
    ]);
    const cgroups = { all: () => paths } as unknown as CgroupPaths;
    for (const text of ['container:shop-a', 'namespace:prod']) {
      const selection = new CgroupSelection(
        { include: [parseSelector(text)], exclude: [], filterTransactions: false },
        services,
        cgroups,
      );
      expect(selection.resolve()).toEqual({ include: [2n], exclude: [] });
    }
  });
});
