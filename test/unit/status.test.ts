import { storedCounters, type CounterSnapshot } from '../../agent/status';
import { KERNEL_COUNTER_NAMES, kernelCounters } from '../../core/model';

describe('storedCounters', () => {
  it('stores every counter under its stable snake_case name', () => {
    const snapshot: CounterSnapshot = {
      ...kernelCounters(KERNEL_COUNTER_NAMES.map((_, i) => i + 1)),
      malformedMarkers: 11,
      unknownContexts: 12,
      unknownTargets: 13,
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
    };
    expect(storedCounters(snapshot)).toEqual({
      sys_write_emitted: 1,
      sys_write_dropped: 2,
      block_io_emitted: 3,
      block_io_dropped: 4,
      context_emitted: 5,
      context_dropped: 6,
      thread_table_full: 7,
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
      uninherited_thread: 20,
      malformed_markers: 11,
      unknown_contexts: 12,
      unknown_targets: 13,
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
    });
  });
});
