/** Incident files on disk: read whole and checked, written whole or not at all. */
import { closeSync, constants, fstatSync, openSync, readFileSync, type Stats } from 'node:fs';
import { open, readFile, rename, rm, writeFile } from 'node:fs/promises';
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
    const file = await open(path, READ_FLAGS);
    try {
      regularOnly(path, await file.stat());
      bytes = await file.readFile();
    } finally {
      await file.close();
    }
  } catch (err) {
    throw readError(path, err);
  }
  return only ? decodeIncident(bytes, path, only) : decodeIncident(bytes, path);
}

/**
 * The bytes of the incident file `path`, read only if it is a regular file: a FIFO, a socket or a
 * device in an incidents folder would block the reader forever (its open is non-blocking, then
 * checked, before any read).
 */
export function readIncidentBytesSync(path: string): Buffer {
  try {
    const fd = openSync(path, READ_FLAGS);
    try {
      regularOnly(path, fstatSync(fd));
      return readFileSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    throw readError(path, err);
  }
}

const READ_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

function regularOnly(path: string, stat: Stats): void {
  if (stat.isFile()) return;
  const kind = stat.isFIFO()
    ? 'a FIFO'
    : stat.isSocket()
      ? 'a socket'
      : stat.isDirectory()
        ? 'a directory'
        : 'a device';
  throw new IncidentFileError('E_INCIDENT_READ', path, `is ${kind}, not a regular file: not read`);
}

function readError(path: string, err: unknown): IncidentFileError {
  if (err instanceof IncidentFileError) return err;
  return new IncidentFileError('E_INCIDENT_READ', path, `cannot be read: ${(err as Error).message}`, {
    cause: err,
  });
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
