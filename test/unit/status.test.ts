import { formatStatusLine, lastStatusTotals, storedCounters, type CounterSnapshot } from '../../agent/status';
import { KERNEL_COUNTER_NAMES, kernelCounters } from '../../core/model';
import { runtimeHookCounters } from '../../agent/runtimes/discovery/runtime-hook';

const snapshot: CounterSnapshot = {
  ...kernelCounters(KERNEL_COUNTER_NAMES.map((_, i) => i + 1)),
  malformedMarkers: 11,
  unknownContexts: 12,
  unknownTargets: 13,
  unreadableContainerStates: 34,
  unresolvedContainerPaths: 35,
  containersPastBound: 36,
  corruptRecords: 14,
  corruptBytes: 15,
  diskFullDropped: 17,
  storeErrorDropped: 18,
  storeReplacements: 19,
  rowsWritten: 16,
  pruned: 20,
  unshippedPruned: 21,
  incompleteRequestHeads: 22,
  untracedRequestHeads: 23,
  pipelinedRequestHeads: 24,
  ...runtimeHookCounters(),
  nodeHooked: 25,
  nodeHookRefused: 26,
  nodeHookFailed: 27,
  nodeHookIntrusions: 31,
  nodeHookStderrLines: 32,
  pythonHooked: 28,
  pythonHookRefused: 29,
  pythonHookFailed: 30,
  pythonHookOutOfScope: 31,
  goHookNoHook: 32,
  jvmHookNoHook: 33,
};

describe('storedCounters', () => {
  it('stores every counter under its stable snake_case name', () => {
    expect(storedCounters(snapshot)).toEqual({
      sys_write_emitted: 1,
      sys_write_dropped: 2,
      block_io_emitted: 3,
      block_io_dropped: 4,
      context_emitted: 5,
      context_dropped: 6,
      thread_entry_lost: 7,
      request_table_full: 8,
      target_dropped: 9,
      target_emitted: 10,
      sys_write_sampled_out: 11,
      sys_read_emitted: 12,
      sys_read_dropped: 13,
      sys_fsync_emitted: 14,
      sys_fsync_dropped: 15,
      sys_connect_emitted: 16,
      sys_connect_dropped: 17,
      connect_table_full: 18,
      interleaved_head: 19,
      outlived_thread: 20,
      multiplexed_call: 21,
      unsure_read: 22,
      outlived_process: 23,
      outlived_goroutine: 24,
      outlived_unit: 25,
      restarted_call: 26,
      agent_interrupted_call: 27,
      uninherited_jvm_thread: 28,
      malformed_markers: 11,
      unknown_contexts: 12,
      unknown_targets: 13,
      unreadable_container_states: 34,
      unresolved_container_paths: 35,
      containers_past_bound: 36,
      corrupt_records: 14,
      corrupt_bytes: 15,
      disk_full_dropped: 17,
      store_error_dropped: 18,
      store_replacements: 19,
      rows_written: 16,
      pruned: 20,
      unshipped_pruned: 21,
      incomplete_request_heads: 22,
      untraced_request_heads: 23,
      pipelined_request_heads: 24,
      node_hooked: 25,
      node_hook_refused: 26,
      node_hook_failed: 27,
      node_hook_intrusions: 31,
      node_hook_stderr_lines: 32,
      python_hooked: 28,
      python_hook_refused: 29,
      python_hook_failed: 30,
      python_hook_out_of_scope: 31,
      go_hook_no_hook: 32,
      jvm_hook_no_hook: 33,
      ...Object.fromEntries(
        ['node_hook_out_of_scope', 'node_hook_no_hook', 'python_hook_no_hook']
          .concat(
            ['go', 'jvm'].flatMap((r) => [
              `${r}_hooked`,
              `${r}_hook_refused`,
              `${r}_hook_failed`,
              `${r}_hook_out_of_scope`,
            ]),
          )
          .map((name) => [name, 0]),
      ),
    });
  });
});

describe('lastStatusTotals', () => {
  const line = (over: Partial<CounterSnapshot>) =>
    formatStatusLine({ ...snapshot, ...over }, snapshot, 1, 0.5, 1024);

  it('reads the totals of the last line formatStatusLine wrote: stored, and dropped for every reason', () => {
    const output = `${line({ rowsWritten: 5 })}\nsome other log line\n${line({ rowsWritten: 700 })}\n`;
    // dropped: the ring's (sys_write 2, block_io 4, context 6, sys_read 13, sys_fsync 15, sys_connect 17), disk full 17, store errors 18
    expect(lastStatusTotals(output)).toEqual({ stored: 700, dropped: 2 + 4 + 6 + 13 + 15 + 17 + 17 + 18 });
  });

  it('reads a line that counts unshipped pruned events too', () => {
    expect(lastStatusTotals(line({ rowsWritten: 9, unshippedPruned: 3 }))?.stored).toBe(9);
    expect(lastStatusTotals(line({ rowsWritten: 9, unshippedPruned: 0 }))?.stored).toBe(9);
  });

  it('is undefined before the first status line', () => {
    expect(lastStatusTotals('agent: capturing on 2 cpus\n')).toBeUndefined();
  });
});
