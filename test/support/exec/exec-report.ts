/** The fields of `replay --exec --report-json` the tests read. */
export interface ExecReportRow {
  call: string;
  target: string;
  recorded_calls: number;
  held: boolean;
  reason: string;
  shortfall: string | null;
  matched: number;
  recorded_bytes: number;
  matched_bytes: number;
  passed_through: number;
  gave_up: number;
  ambiguous: number;
  difference: string | null;
  observed_p50_ns: string | number | null;
  observed_p99_ns: string | number | null;
}
export interface ExecReport {
  verdict: string;
  reasons: string[];
  first_held_ns: number | string | null;
  causes: { target: string; cause: string; exercised: boolean; reason: string; wait_ns: number | string }[];
  targets: ExecReportRow[];
}
