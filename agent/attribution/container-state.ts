/**
 * A container's name, image, pod and labels, from its runtime's own state on
 * the host: the OCI bundle's config.json (annotations, where a kubelet's CRI
 * runtime writes io.kubernetes.*), containers/storage's containers.json
 * (podman's names and image), docker's config.v2.json. These files are the
 * runtimes', read as untrusted input: bounded in size, never followed
 * through a symlink or opened when not a regular file, their JSON checked
 * field by field. What cannot be read leaves the field null and says why.
 */
import { closeSync, constants, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { Container, ContainerRuntime } from '../../core/model';
import type { ContainerRef } from './container-id';

export interface RuntimeRoots {
  /** containers/storage's graph root: podman's bundles and containers.json */
  storage: string;
  /** containers/storage's run root: CRI-O's bundles */
  storageRun: string;
  /** containerd's v2 task bundles, one directory per containerd namespace */
  containerd: string;
  /** docker's containers directory */
  docker: string;
}

export const DEFAULT_RUNTIME_ROOTS: RuntimeRoots = {
  storage: '/var/lib/containers/storage',
  storageRun: '/run/containers/storage',
  containerd: '/run/containerd/io.containerd.runtime.v2.task',
  docker: '/var/lib/docker/containers',
};

/** A bundle's config.json or docker's config.v2.json: far larger is not a runtime's. */
export const MAX_STATE_BYTES = 4 << 20;
/** containers.json lists every container of the host (about 600 bytes each). */
export const MAX_CONTAINERS_JSON_BYTES = 16 << 20;
/** Labels kept per container, and the longest key and value; the rest are left out and said. */
export const MAX_LABELS = 128;
export const MAX_LABEL_KEY = 253;
export const MAX_LABEL_VALUE = 1024;

export interface ContainerState {
  container: Container;
  /** why a field is missing (unreadable or malformed state), null when everything read */
  problem: string | null;
}

type Json = Record<string, unknown>;
type Read<T> = { value: T } | { error: string };

/** A regular file's JSON, at most `maxBytes`, or why not. */
export function readJsonFile(path: string, maxBytes = MAX_STATE_BYTES): Read<unknown> {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO in a state file's place must not hang the agent
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    return { error: `${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { error: `${path}: not a regular file` };
    if (stat.size > maxBytes) return { error: `${path}: ${stat.size} bytes, more than ${maxBytes}` };
    const buf = Buffer.alloc(stat.size);
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, got);
      if (n === 0) break;
      got += n;
    }
    return { value: JSON.parse(buf.toString('utf8', 0, got)) as unknown };
  } catch (err) {
    return { error: `${path}: ${(err as Error).message}` };
  } finally {
    closeSync(fd);
  }
}

const text = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const object = (v: unknown): Json =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : {};

/** What the runtime's files said so far, and what they could not say. */
class StateBuilder {
  readonly labels: Record<string, string> = {};
  private labelCount = 0;
  private dropped = 0;
  readonly problems: string[] = [];

  /** The file's JSON object, or null (and the problem kept). */
  read(path: string, maxBytes = MAX_STATE_BYTES): Json | null {
    const read = readJsonFile(path, maxBytes);
    if ('error' in read) {
      this.problems.push(read.error);
      return null;
    }
    if (typeof read.value !== 'object' || read.value === null || Array.isArray(read.value)) {
      this.problems.push(`${path}: not a JSON object`);
      return null;
    }
    return read.value as Json;
  }

  addLabels(source: unknown): void {
    for (const [key, value] of Object.entries(object(source))) {
      if (typeof value !== 'string' || Object.hasOwn(this.labels, key)) continue;
      if (this.labelCount >= MAX_LABELS || key.length > MAX_LABEL_KEY || value.length > MAX_LABEL_VALUE) {
        this.dropped++;
        continue;
      }
      this.labels[key] = value;
      this.labelCount++;
    }
  }

  /** A bundle's config.json annotations; CRI-O keeps the container's labels in one as JSON. */
  addBundle(path: string): boolean {
    const config = this.read(path);
    if (!config) return false;
    this.addLabels(config.annotations);
    const crioLabels = this.labels['io.kubernetes.cri-o.Labels'];
    if (crioLabels !== undefined) {
      try {
        this.addLabels(JSON.parse(crioLabels));
      } catch {
        this.problems.push(`${path}: io.kubernetes.cri-o.Labels is not JSON`);
      }
    }
    return true;
  }

  label(...keys: string[]): string | null {
    for (const key of keys) {
      const value = Object.hasOwn(this.labels, key) ? text(this.labels[key]) : null;
      if (value) return value;
    }
    return null;
  }

  finish(ref: ContainerRef, name: string | null, image: string | null): ContainerState {
    if (this.dropped) this.problems.push(`${this.dropped} labels left out (over ${MAX_LABELS} or too long)`);
    return {
      container: {
        id: ref.id,
        runtime: ref.runtime,
        name: this.label('io.kubernetes.container.name', 'io.kubernetes.cri.container-name') ?? name,
        image: image ?? this.label('io.kubernetes.cri.image-name', 'io.kubernetes.cri-o.ImageName'),
        pod: this.label('io.kubernetes.pod.name', 'io.kubernetes.cri.sandbox-name'),
        namespace: this.label('io.kubernetes.pod.namespace', 'io.kubernetes.cri.sandbox-namespace'),
        labels: this.labels,
      },
      problem: this.problems.length ? this.problems.join('; ') : null,
    };
  }
}

/** podman's name and image: containers/storage's containers.json entry for the id. */
function storageEntry(
  b: StateBuilder,
  roots: RuntimeRoots,
  id: string,
): { name: string | null; image: string | null } {
  const path = join(roots.storage, 'overlay-containers', 'containers.json');
  const read = readJsonFile(path, MAX_CONTAINERS_JSON_BYTES);
  if ('error' in read || !Array.isArray(read.value)) {
    b.problems.push('error' in read ? read.error : `${path}: not a JSON array`);
    return { name: null, image: null };
  }
  const entry = object((read.value as unknown[]).find((e) => object(e).id === id));
  if (entry.id === undefined) {
    b.problems.push(`${path}: no entry for ${id}`);
    return { name: null, image: null };
  }
  const names: unknown[] = Array.isArray(entry.names) ? (entry.names as unknown[]) : [];
  let image: string | null = null;
  try {
    image = text(object(JSON.parse(String(entry.metadata ?? '{}')))['image-name']);
  } catch {
    b.problems.push(`${path}: the metadata of ${id} is not JSON`);
  }
  return { name: text(names[0]), image };
}

const bundleIn = (storageRoot: string, id: string) =>
  join(storageRoot, 'overlay-containers', id, 'userdata', 'config.json');

function podmanState(b: StateBuilder, roots: RuntimeRoots, ref: ContainerRef): ContainerState {
  b.addBundle(bundleIn(roots.storage, ref.id));
  const { name, image } = storageEntry(b, roots, ref.id);
  return b.finish(ref, name, image);
}

function crioState(b: StateBuilder, roots: RuntimeRoots, ref: ContainerRef): ContainerState {
  if (!b.addBundle(bundleIn(roots.storageRun, ref.id))) b.addBundle(bundleIn(roots.storage, ref.id));
  return b.finish(ref, null, null);
}

/** containerd keeps a bundle per namespace (k8s.io for the kubelet's, moby for docker's). */
function containerdState(b: StateBuilder, roots: RuntimeRoots, ref: ContainerRef): ContainerState {
  let namespaces: string[] = [];
  try {
    namespaces = readdirSync(roots.containerd).slice(0, 64);
  } catch (err) {
    b.problems.push(`${roots.containerd}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const found = namespaces.find((ns) => {
    const tried = b.problems.length;
    const ok = b.addBundle(join(roots.containerd, ns, ref.id, 'config.json'));
    b.problems.length = tried; // a namespace without the container is not a problem
    return ok;
  });
  if (found === undefined) b.problems.push(`no containerd bundle for ${ref.id} in ${roots.containerd}`);
  return b.finish(ref, null, null);
}

function dockerState(b: StateBuilder, roots: RuntimeRoots, ref: ContainerRef): ContainerState {
  const config = b.read(join(roots.docker, ref.id, 'config.v2.json'));
  const inner = object(config?.Config);
  b.addLabels(inner.Labels);
  const name = text(config?.Name);
  return b.finish(ref, name && name.startsWith('/') ? name.slice(1) || null : name, text(inner.Image));
}

const READERS: Record<
  Exclude<ContainerRuntime, 'unknown'>,
  (b: StateBuilder, roots: RuntimeRoots, ref: ContainerRef) => ContainerState
> = { podman: podmanState, crio: crioState, containerd: containerdState, docker: dockerState };

/**
 * The container's state from its runtime's files. A kubelet's cgroupfs path
 * does not say the runtime: each is tried, the first with a readable bundle
 * answers (and becomes the runtime).
 */
export function readContainerState(
  ref: ContainerRef,
  roots: RuntimeRoots = DEFAULT_RUNTIME_ROOTS,
): ContainerState {
  if (ref.runtime !== 'unknown') return READERS[ref.runtime](new StateBuilder(), roots, ref);
  for (const runtime of ['crio', 'containerd', 'docker', 'podman'] as const) {
    const state = READERS[runtime](new StateBuilder(), roots, { id: ref.id, runtime });
    if (state.container.name !== null || Object.keys(state.container.labels).length) return state;
  }
  const b = new StateBuilder();
  b.problems.push(`no runtime's state found for ${ref.id}`);
  return b.finish(ref, null, null);
}
