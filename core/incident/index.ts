/** The incident file format: its one owner (docs/query.md "Incident files"). */
export { readIncidentBytesSync, readIncidentFile, writeIncidentFile } from './incident-file';
export { decodeIncident, contentKey, MAX_INCIDENT_JSON_BYTES, ZSTD_MAGIC } from './incident-codec';
export { IncidentFileError, type IncidentErrorCode } from './incident-error';
export { IncidentWriter, exportTime, type IncidentWriterOptions } from './incident-writer';
export { incidentCauses, waitOf, CAUSE_SHARE, CAUSE_MIN_WAIT_NS } from './incident-causes';
export {
  INCIDENT_FORMAT_VERSION,
  REDACT_KINDS,
  type Incident,
  type IncidentCause,
  type IncidentFields,
  type IncidentHeader,
  type IncidentRun,
  type RedactKind,
} from './incident-types';
