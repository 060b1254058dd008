/**
 * The container of a cgroup path, read from its runtime's state once per
 * cgroup and kept (a container's cgroup is its own; a removed container's
 * path never comes back with another id). Unreadable state still gives the
 * container by its id, and is counted and logged once per container.
 */
import type { Container } from '../../core/model';
import { containerOfCgroup } from './container-id';
import { DEFAULT_RUNTIME_ROOTS, readContainerState, type RuntimeRoots } from './container-state';

const MAX_CACHED_CGROUPS = 16384;

export class ContainerResolver {
  private readonly byCgroup = new Map<string, Container | null>();
  /** containers whose state could not be read whole */
  unreadableStates = 0;

  constructor(
    private readonly roots: RuntimeRoots = DEFAULT_RUNTIME_ROOTS,
    private readonly onProblem: (container: string, problem: string) => void = () => {},
  ) {}

  containerOf(cgroupPath: string | null): Container | null {
    if (!cgroupPath) return null;
    const known = this.byCgroup.get(cgroupPath);
    if (known !== undefined) return known;
    const ref = containerOfCgroup(cgroupPath);
    let container: Container | null = null;
    if (ref) {
      const state = readContainerState(ref, this.roots);
      container = state.container;
      if (state.problem !== null) {
        this.unreadableStates++;
        this.onProblem(ref.id, state.problem);
      }
    }
    if (this.byCgroup.size >= MAX_CACHED_CGROUPS) this.byCgroup.clear();
    this.byCgroup.set(cgroupPath, container);
    return container;
  }
}
