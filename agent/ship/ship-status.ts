/** The shipper's figures in the agent's status line and its counters table. */
import type { ShipStatus } from './shipper';

export function formatShipStatus(s: ShipStatus): string {
  const error = s.state === 'retrying' ? ` retries=${s.retries} error=${JSON.stringify(s.lastError)}` : '';
  return `ship=${s.state} shipped=${s.shipped} lag=${s.lagEvents}ev/${s.lagSeconds.toFixed(1)}s${error}`;
}

/** Stored beside the capture counters (snake_case, stable). */
export function shipCounters(s: ShipStatus): Record<string, number> {
  return {
    ship_shipped: s.shipped,
    ship_lag_events: s.lagEvents,
    ship_lag_ms: Math.round(s.lagSeconds * 1000),
    ship_retries: s.retries,
  };
}
