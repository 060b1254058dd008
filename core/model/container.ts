/**
 * The container a process runs in, as its runtime's own state on the host
 * tells it: stored once per container (the store's containers table holds
 * this object's JSON), shown on every event of its processes.
 */
export type ContainerRuntime = 'podman' | 'docker' | 'containerd' | 'crio' | 'unknown';

export interface Container {
  /** the runtime's full container id (hex), from the cgroup path */
  id: string;
  runtime: ContainerRuntime;
  /** the container's name (Kubernetes: the pod spec's container name); null when the state was unreadable */
  name: string | null;
  image: string | null;
  /** Kubernetes pod and namespace (CRI annotations io.kubernetes.pod.*), null outside Kubernetes */
  pod: string | null;
  namespace: string | null;
  /** the runtime's labels and annotations on the container, bounded (agent/attribution/container-state.ts) */
  labels: Record<string, string>;
  /**
   * on an event: its process's pid in the container's pid namespace (NSpid, what `ps` inside shows);
   * absent when /proc no longer told it
   */
  pid?: number;
}

/**
 * The shortest container id prefix that names a container (what `podman ps` and `docker ps` show):
 * --include container:, the events API's container= and the ClickHouse reader all match by it.
 */
export const CONTAINER_ID_PREFIX = 12;

/** Whether `text` names the container: its name, its id, or an id prefix of CONTAINER_ID_PREFIX or more. */
export function namesContainer(text: string, c: Container): boolean {
  return c.name === text || (text.length >= CONTAINER_ID_PREFIX && c.id.startsWith(text));
}

/** Reads a containers row's JSON; a row that is not one gives a container known only by its text. */
export function parseContainer(json: string): Container {
  try {
    const value = JSON.parse(json) as Partial<Container>;
    if (typeof value.id === 'string')
      return {
        id: value.id,
        runtime: value.runtime ?? 'unknown',
        name: value.name ?? null,
        image: value.image ?? null,
        pod: value.pod ?? null,
        namespace: value.namespace ?? null,
        labels: value.labels ?? {},
        ...(typeof value.pid === 'number' && { pid: value.pid }),
      };
  } catch {
    // below
  }
  return { id: json, runtime: 'unknown', name: null, image: null, pod: null, namespace: null, labels: {} };
}
