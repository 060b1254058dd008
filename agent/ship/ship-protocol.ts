/** What the agent's thread and the shipper's thread (agent/ship/ship-thread.ts) pass each other. */
import type { ClickHouseEndpoint } from '../../core/clickhouse/http-client';
import type { ShipLoopOptions, ShipProgress } from './ship-loop';

export interface ShipThreadData {
  storePath: string;
  endpoint: ClickHouseEndpoint;
  timeoutMs: number;
  destination: string;
  /** where the loop starts: the saved cursor and counts */
  progress: ShipProgress;
  options: ShipLoopOptions;
}

/** The one request: stop, after shipping what is stored for at most flushMs. */
export interface ToShipThread {
  op: 'stop';
  flushMs: number;
}
