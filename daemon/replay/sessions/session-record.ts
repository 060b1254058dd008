/** A session as the API shows it, written with exact integers. */
import type { Driving } from './session-schema';
import type { SessionState } from './session-state';

export interface SessionRecord {
  id: string;
  transaction_id: string;
  speed_factor: number;
  extra_latency_ns: number;
  /** the build under test this session paces (`kreplay replay --exec`), else null */
  driving: Driving | null;
  state: SessionState;
  position_ns: bigint;
  duration_ns: bigint;
  events_total: number;
  events_emitted: number;
  created_at: string;
  updated_at: string;
  timing: {
    lateness_p50_ns: bigint | null;
    lateness_p99_ns: bigint | null;
    lateness_max_ns: bigint | null;
    /** how late the latest release was while that is past BEHIND_AFTER_NS (the clock cannot keep up), else 0 */
    behind_ns: bigint;
  };
}
