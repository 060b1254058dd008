/**
 * What the daemon's main thread and its query workers say to each other.
 * Requests name an operation of query-ops.ts and its arguments; answers
 * carry the result (structured-cloned: bigints survive) or the error, as
 * data, so that the main thread can raise the same class the worker caught.
 */
import { isErrorCode } from '../../core/error-codes';
import { KreplayError } from '../../core/errors';
import { StoreError, type StoreErrorCode } from '../../core/store/schema';
import { ProblemError, type ParamError } from '../http/problem';
import type { ProblemKind } from '../../core/problem-kinds';
import type { StoreScope } from '../store/store-directory';
import type { QueryOp, QueryOps } from './query-ops';

/** An operation of query-ops.ts and its arguments (`id` 0: no answer is awaited). */
export type QueryRequest = {
  [K in QueryOp]: { id: number; op: K; args: Parameters<QueryOps[K]> };
}[QueryOp];

export type WireError =
  | {
      type: 'problem';
      kind: ProblemKind;
      detail: string;
      errors?: ParamError[];
      headers?: Record<string, string>;
    }
  | { type: 'store'; code: StoreErrorCode; message: string; file?: string }
  | { type: 'other'; code?: string; message: string };

export type QueryAnswer =
  { id: number; ok: true; result: unknown } | { id: number; ok: false; error: WireError };

export interface QueryWorkerData {
  dataDir: string;
  scope: StoreScope;
}

export function toWire(err: unknown): WireError {
  if (err instanceof ProblemError)
    return { type: 'problem', kind: err.kind, detail: err.detail, errors: err.errors, headers: err.headers };
  if (err instanceof StoreError)
    return { type: 'store', code: err.code, message: err.message, file: err.file };
  const error = err as { code?: unknown; message?: unknown };
  return {
    type: 'other',
    code: typeof error?.code === 'string' ? error.code : undefined,
    message: typeof error?.message === 'string' ? error.message : String(err),
  };
}

export function fromWire(wire: WireError): Error {
  if (wire.type === 'problem') return new ProblemError(wire.kind, wire.detail, wire.errors, wire.headers);
  if (wire.type === 'store') return new StoreError(wire.code, wire.message, wire.file);
  if (isErrorCode(wire.code)) return new KreplayError(wire.code, wire.message);
  // a code that is not kreplay's (SQLite's, an errno's) stays on the error, as Node's own errors carry theirs
  return wire.code ? Object.assign(new Error(wire.message), { code: wire.code }) : new Error(wire.message);
}
