/** What is wrong with an incident file, by a stable code; the message names the file. */
import { KreplayError } from '../errors';

export type IncidentErrorCode =
  /** not a zstd frame, or a frame that does not hold an incident */
  | 'E_INCIDENT_NOT_INCIDENT'
  /** the file ends before its zstd frame does */
  | 'E_INCIDENT_TRUNCATED'
  /** zstd found the frame damaged, or its JSON is not an incident's */
  | 'E_INCIDENT_CORRUPT'
  /** the content does not match the digest the file carries */
  | 'E_INCIDENT_DIGEST'
  /** written by a newer kreplay in a format version this one does not know */
  | 'E_INCIDENT_NEWER'
  /** the file cannot be read at all (missing, unreadable, too large) */
  | 'E_INCIDENT_READ';

export class IncidentFileError extends KreplayError {
  declare readonly code: IncidentErrorCode;
  constructor(
    code: IncidentErrorCode,
    readonly file: string,
    problem: string,
    options?: ErrorOptions,
  ) {
    super(code, `${file}: ${problem}`, options);
  }
}
