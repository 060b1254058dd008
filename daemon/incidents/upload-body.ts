/**
 * An incident upload's body, read as it comes rather than buffered whole first: its first bytes
 * must be a zstd frame's magic (else it is refused before the rest is read), it may not pass the
 * size limit, and the uploads under way share one bound on their number and their bytes, so
 * concurrent garbage cannot take the daemon's memory.
 */
import type { Request } from 'express';
import { ZSTD_MAGIC } from '../../core/incident';
import { ProblemError } from '../http/problem';

export interface UploadLimits {
  /** bytes one upload may have */
  maxBytes: number;
  /** uploads read at once */
  maxConcurrent: number;
  /** bytes of all uploads under way (a body without Content-Length counts as maxBytes) */
  maxInFlightBytes: number;
}

export const DEFAULT_UPLOAD_LIMITS: UploadLimits = {
  maxBytes: 256 << 20,
  maxConcurrent: 2,
  maxInFlightBytes: 256 << 20,
};

/** Seconds a refused client is told to wait. */
const RETRY_AFTER_S = 5;

export class UploadGate {
  private active = 0;
  private inFlight = 0;

  constructor(readonly limits: UploadLimits = DEFAULT_UPLOAD_LIMITS) {}

  /** Takes a place for an upload of `bytes` (its Content-Length, else the limit); 429 when there is none. */
  enter(bytes: number): () => void {
    const { maxConcurrent, maxInFlightBytes } = this.limits;
    if (this.active >= maxConcurrent || this.inFlight + bytes > maxInFlightBytes)
      throw new ProblemError(
        'too-many-uploads',
        `${this.active} uploads (${this.inFlight} bytes) are being read, the most this daemon takes at once`,
        undefined,
        { 'Retry-After': String(RETRY_AFTER_S) },
      );
    this.active++;
    this.inFlight += bytes;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.active--;
      this.inFlight -= bytes;
    };
  }
}

/**
 * The body of `req`, checked as it arrives; a ProblemError as soon as it cannot be an incident file.
 * It is read into one buffer of its own (of its Content-Length where given), which the incident
 * thread can then take without a copy.
 */
export async function readUpload(req: Request, gate: UploadGate): Promise<Uint8Array> {
  const { maxBytes } = gate.limits;
  const declared = req.headers['content-length'] === undefined ? null : Number(req.headers['content-length']);
  if (declared !== null && declared > maxBytes) throw tooLarge(maxBytes);
  const leave = gate.enter(declared ?? maxBytes);
  try {
    let body = new Uint8Array(declared ?? 1 << 20);
    let length = 0;
    let checked = false;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      if (length + chunk.length > maxBytes) throw tooLarge(maxBytes);
      if (length + chunk.length > body.length) {
        // no Content-Length (or a wrong one): grow by doubling, within the limit
        const grown = new Uint8Array(Math.min(maxBytes, Math.max(2 * body.length, length + chunk.length)));
        grown.set(body.subarray(0, length));
        body = grown;
      }
      body.set(chunk, length);
      length += chunk.length;
      if (!checked && length >= ZSTD_MAGIC.length) {
        if (!ZSTD_MAGIC.equals(body.subarray(0, ZSTD_MAGIC.length))) throw notIncident();
        checked = true;
      }
    }
    if (!checked) throw notIncident();
    return length === body.length ? body : body.slice(0, length);
  } finally {
    leave();
  }
}

function tooLarge(maxBytes: number): ProblemError {
  // the rest of the body is not read: the connection goes with the answer
  return new ProblemError(
    'body-too-large',
    `an incident upload may have at most ${maxBytes} bytes`,
    undefined,
    {
      Connection: 'close',
    },
  );
}

function notIncident(): ProblemError {
  const message = 'not an incident file (not a zstd frame): refused on its first bytes';
  return new ProblemError('invalid-incident', message, [{ param: 'body', message }], { Connection: 'close' });
}
