import { storedCounters, type CounterSnapshot } from '../../agent/status';
import { KERNEL_COUNTER_NAMES, zeroKernelCounters } from '../../core/model';

describe('storedCounters', () => {
  it('stores every counter under its stable snake_case name', () => {
    const snapshot: CounterSnapshot = {
      ...zeroKernelCounters(),
      malformedMarkers: 9,
      unknownContexts: 10,
      corruptRecords: 11,
      corruptBytes: 12,
      rowsWritten: 13,
    };
    KERNEL_COUNTER_NAMES.forEach((name, i) => (snapshot[name] = i + 1));
    expect(storedCounters(snapshot)).toEqual({
      sys_write_emitted: 1,
      sys_write_dropped: 2,
      block_io_emitted: 3,
      block_io_dropped: 4,
      context_emitted: 5,
      context_dropped: 6,
      thread_table_full: 7,
      request_table_full: 8,
      malformed_markers: 9,
      unknown_contexts: 10,
      corrupt_records: 11,
      corrupt_bytes: 12,
      rows_written: 13,
    });
  });
});
