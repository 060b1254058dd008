/** What the daemon's main thread and its incident thread say to each other. */
import type { LogLevel } from '../../core/log/logger';
import type { IncidentErrorCode } from '../../core/incident';
import type { IncidentEntry, IncidentListing } from './incident-library';

export interface IncidentThreadData {
  dataDir: string;
}

export type IncidentRequest =
  | { id: number; op: 'refresh' }
  /** the bytes of an uploaded file, transferred */
  | { id: number; op: 'upload'; bytes: Uint8Array };

/** A bad incident file crosses as its parts, to be the same IncidentFileError on the main thread. */
export interface WireIncidentError {
  code: IncidentErrorCode | undefined;
  file: string | undefined;
  message: string;
}

/** What a request did: the listing after it, and the entry of an upload. */
export interface IncidentResult {
  id: number;
  ok: true;
  listing: IncidentListing;
  entry?: IncidentEntry;
}

export type IncidentAnswer =
  | IncidentResult
  | { id: number; ok: false; error: WireIncidentError }
  /** a line the library logged, for the daemon's logger */
  | { id: 0; log: LogLevel; msg: string; fields?: Record<string, unknown> };
