/** Incident files on disk: read whole and checked, written whole or not at all. */
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { contentKey, decodeIncident } from './incident-codec';
import { IncidentFileError } from './incident-error';
import type { EventObject } from './event-columns';
import type { Incident, IncidentFields } from './incident-types';

/**
 * The incident in `path`; an IncidentFileError naming the file when it is
 * not a sound incident file. With `only`, its events hold only those fields.
 */
export async function readIncidentFile(path: string): Promise<Incident>;
export async function readIncidentFile(path: string, only: IncidentFields): Promise<Incident<EventObject>>;
export async function readIncidentFile(
  path: string,
  only?: IncidentFields,
): Promise<Incident | Incident<EventObject>> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    throw new IncidentFileError('E_INCIDENT_READ', path, `cannot be read: ${(err as Error).message}`, {
      cause: err,
    });
  }
  return only ? decodeIncident(bytes, path, only) : decodeIncident(bytes, path);
}

/**
 * Writes `bytes` to `path` through a temporary file renamed at the end. An
 * existing file that differs only in its export time is left untouched (its
 * mtime too), so re-exporting a committed incident changes nothing; returns
 * whether the file was written.
 */
export async function writeIncidentFile(path: string, bytes: Buffer): Promise<boolean> {
  let existing: Buffer | null = null;
  try {
    existing = await readFile(path);
  } catch {
    // nothing there yet (or unreadable: overwritten below)
  }
  if (
    existing &&
    (existing.equals(bytes) || (contentKey(existing) ?? 'old') === (contentKey(bytes) ?? 'new'))
  )
    return false;
  const partial = `${path}.partial`;
  try {
    await writeFile(partial, bytes);
    await rename(partial, path);
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
  return true;
}
