/** A session as the API shows it, written with exact integers. */
import type { SessionState } from './session-state';

export interface SessionRecord {
  id: string;
  transaction_id: string;
  speed_factor: number;
  extra_latency_ns: number;
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
  };
}

/** JSON text with bigints as integer literals, all digits kept (JSON.stringify cannot write a bigint). */
export function exactJson(value: unknown): string {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return `[${value.map(exactJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const members = Object.entries(value).map(([key, v]) => `${JSON.stringify(key)}:${exactJson(v)}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}
