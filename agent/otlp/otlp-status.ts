/** The OTLP export's figures in the agent's status line and its counters table. */
import type { OtlpStatus } from './otlp-exporter';

export function formatOtlpStatus(s: OtlpStatus): string {
  const error = s.lastError === null ? '' : ` error=${JSON.stringify(s.lastError)}`;
  return (
    `otlp=${s.state} spans=${s.exported} queued=${s.queued} dropped=${s.dropped} rejected=${s.rejected}` +
    ` summarized=${s.summarized} unsampled=${s.unsampled}${s.retries > 0 ? ` retries=${s.retries}` : ''}${error}`
  );
}

/** Stored beside the capture counters (snake_case, stable). */
export function otlpCounters(s: OtlpStatus): Record<string, number> {
  return {
    otlp_exported_spans: s.exported,
    otlp_dropped_spans: s.dropped,
    otlp_rejected_spans: s.rejected,
    otlp_summarized_events: s.summarized,
    otlp_unsampled_events: s.unsampled,
    otlp_retries: s.retries,
  };
}
