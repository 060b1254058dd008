/** Every kreplay error class shares one base and carries a string code. */
import { KreplayError } from '../../core/errors';
import { StoreError } from '../../core/store/schema';
import { ConfigError } from '../../agent/config/load-config';
import { CorruptRecordError } from '../../agent/ingest/record-decoder';
import { StoreLockedError } from '../../agent/store/writer-lock';
import { StoreThreadError } from '../../agent/store/store-pipeline';
import { CaptureError } from '../../agent/capture/capture-error';
import { ProblemError } from '../../daemon/http/problem';
import { PROBLEM_KINDS, problemCode, type ProblemKind } from '../../core/problem-kinds';
import { InvalidValue } from '../../daemon/http/query-values';
import { HttpError } from '../../cli/sse-client';
import { ClockError, asClockError } from '../../daemon/replay/clock/clock-error';
import { NativeLoadError } from '../../core/native/addon';

describe('KreplayError', () => {
  it.each([
    [new StoreError('E_STORE_OPEN', 'x'), 'StoreError', 'E_STORE_OPEN'],
    [new ConfigError('x'), 'ConfigError', 'E_CONFIG'],
    [new CorruptRecordError(4, 8, 'x'), 'CorruptRecordError', 'E_CORRUPT_RECORD'],
    [new StoreLockedError('x'), 'StoreLockedError', 'E_STORE_LOCKED'],
    [new StoreThreadError('x'), 'StoreThreadError', 'E_STORE_THREAD'],
    [new StoreThreadError('x', 'E_DATA_DIR'), 'StoreThreadError', 'E_DATA_DIR'],
    [new StoreThreadError('x', 'SQLITE_FULL'), 'StoreThreadError', 'E_STORE_THREAD'],
    [new CaptureError('E_CAPTURE_ATTACH', 'x'), 'CaptureError', 'E_CAPTURE_ATTACH'],
    [new ProblemError('session-not-found', 'x'), 'ProblemError', 'E_SESSION_NOT_FOUND'],
    [new InvalidValue('x'), 'InvalidValue', 'E_INVALID_VALUE'],
    [new HttpError(500, ''), 'HttpError', 'E_HTTP'],
    [new ClockError('E_PIPE', 'x'), 'ClockError', 'E_PIPE'],
    [new NativeLoadError('x'), 'NativeLoadError', 'E_NATIVE_LOAD'],
  ])('%s is a KreplayError named %s with code %s', (error, name, code) => {
    expect(error).toBeInstanceOf(KreplayError);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe(name);
    expect(error.code).toBe(code);
  });

  it('gives every problem kind its own type and code', () => {
    const kinds = Object.keys(PROBLEM_KINDS) as ProblemKind[];
    const problems = kinds.map((kind) => new ProblemError(kind, 'd').toProblem());
    expect(new Set(problems.map((p) => p.type)).size).toBe(kinds.length);
    expect(new Set(kinds.map(problemCode)).size).toBe(kinds.length);
    for (const [i, p] of problems.entries()) expect(p.status).toBe(PROBLEM_KINDS[kinds[i]!].status);
  });
});

describe('the replay clock’s native errors', () => {
  it('keeps the code the addon gave, in the clock’s own class', () => {
    const thrown = () =>
      asClockError('E_SCHED', () => {
        throw Object.assign(new Error('no CAP_SYS_NICE'), { code: 'E_SCHED_PERM' });
      });
    expect(thrown).toThrow(ClockError);
    expect(thrown).toThrow(expect.objectContaining({ code: 'E_SCHED_PERM', message: 'no CAP_SYS_NICE' }));
  });

  it('gives an uncoded failure the call’s own code', () => {
    expect(() =>
      asClockError('E_PIPE', () => {
        throw new Error('EMFILE');
      }),
    ).toThrow(expect.objectContaining({ code: 'E_PIPE', name: 'ClockError' }));
  });
});
