/**
 * Which container a cgroup path is, by the names runtimes give their
 * containers' cgroups:
 *   podman            .../libpod-<id>.scope, or libpod-<id> (cgroupfs)
 *   docker            .../docker-<id>.scope, or /docker/<id>
 *   containerd (CRI)  .../cri-containerd-<id>.scope
 *   CRI-O             .../crio-<id>.scope
 *   kubelet cgroupfs  /kubepods/<qos>/pod<uid>/<id> (runtime unknown)
 * The innermost match wins (a container inside a container's cgroup is the
 * inner one); conmon's own scopes (libpod-conmon-, crio-conmon-) are not
 * containers. The id is the runtime's 64-hex container id.
 */
import type { ContainerRuntime } from '../../core/model';

export interface ContainerRef {
  id: string;
  runtime: ContainerRuntime;
}

const HEX64 = '([0-9a-f]{64})';
const SEGMENT_RULES: readonly [RegExp, ContainerRuntime][] = [
  [new RegExp(`^libpod-${HEX64}(?:\\.scope)?$`), 'podman'],
  [new RegExp(`^docker-${HEX64}\\.scope$`), 'docker'],
  [new RegExp(`^cri-containerd-${HEX64}\\.scope$`), 'containerd'],
  [new RegExp(`^crio-${HEX64}(?:\\.scope)?$`), 'crio'],
];
const BARE_ID = new RegExp(`^${HEX64}$`);

export function containerOfCgroup(cgroupPath: string | null): ContainerRef | null {
  if (!cgroupPath) return null;
  const parts = cgroupPath.split('/');
  for (let i = parts.length - 1; i >= 0; i--) {
    const part = parts[i]!;
    for (const [rule, runtime] of SEGMENT_RULES) {
      const id = rule.exec(part)?.[1];
      if (id) return { id, runtime };
    }
    // a bare id is a container only under a runtime's parent: docker's cgroupfs tree or a kubelet's
    if (
      BARE_ID.test(part) &&
      i > 0 &&
      (parts[i - 1] === 'docker' || /^kubepods|^pod[0-9a-f_-]+$/.test(parts[i - 1]!))
    )
      return { id: part, runtime: parts[i - 1] === 'docker' ? 'docker' : 'unknown' };
  }
  return null;
}
