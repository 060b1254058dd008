/** --include/--exclude for one process in user space, as the kernel's current_wanted decides (agent/filter/task-wanted.ts). */
import { taskWanted } from '../../agent/filter/task-wanted';

describe('taskWanted', () => {
  const task = { pid: 40, comm: 'python3', cgroupId: 7n };

  it('wants every task without includes, and none an exclusion names', () => {
    expect(taskWanted(task, { exclude: [] })).toBe(true);
    expect(taskWanted(task, { exclude: [{ comm: 'python3' }] })).toBe(false);
    expect(taskWanted(task, { exclude: [{ cgroupId: 7n }] })).toBe(false);
    expect(taskWanted(task, { exclude: [{ pid: 41 }] })).toBe(true);
  });

  it('wants a task one include names, and an exclusion wins over it', () => {
    expect(taskWanted(task, { include: [], exclude: [] })).toBe(false);
    expect(taskWanted(task, { include: [{ pid: 1 }, { cgroupId: 7n }], exclude: [] })).toBe(true);
    expect(taskWanted(task, { include: [{ pid: 40 }], exclude: [{ comm: 'python3' }] })).toBe(false);
    // an unknown cgroup matches no cgroup selector
    expect(taskWanted({ ...task, cgroupId: null }, { include: [{ cgroupId: 7n }], exclude: [] })).toBe(false);
  });
});
