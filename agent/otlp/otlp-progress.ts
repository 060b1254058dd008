/** What the loop tells its owner: totals since the start, and the queue now. */
export interface OtlpProgress {
  state: 'exporting' | 'retrying' | 'stopped';
  /** spans the receiver accepted (summary spans included) */
  exported: number;
  /** spans that did not fit the queue */
  dropped: number;
  /** spans the receiver refused for good (a non-retryable answer, or a partial success) */
  rejected: number;
  /** events of traces whose traceparent is not sampled (skipped) */
  unsampled: number;
  /** events past their trace's cap, folded into summary spans */
  summarized: number;
  /** spans waiting to be sent */
  queued: number;
  /** requests sent again */
  retries: number;
  /** bytes of the requests the receiver accepted, as sent (gzipped) */
  wireBytes: number;
  lastError: string | null;
}

/** Before the first request: nothing sent, nothing queued. */
export function startingOtlpProgress(): OtlpProgress {
  return {
    state: 'exporting',
    exported: 0,
    dropped: 0,
    rejected: 0,
    unsampled: 0,
    summarized: 0,
    queued: 0,
    retries: 0,
    wireBytes: 0,
    lastError: null,
  };
}
