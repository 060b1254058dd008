/**
 * Events on their way into the store, held column by column in typed arrays
 * that are reused from batch to batch: the hot path allocates no object per
 * event. Timestamps are exact: ts = baseTs + tsOffset[i], the offset a whole
 * number below 2^53.
 */
import { RecordType, type SyscallRecordType } from '../../core/model';
import { batchArrays, batchArraysBytes, paddedBytes, serviceColumn, type BatchArrays } from './batch-columns';

export interface SysWriteFields {
  tsOffset: number;
  dur: number;
  service: number;
  /** store container id, 0 (the default) = none */
  container?: number;
  ctx: number; // store context id, 0 = none
  pid: number;
  tid: number;
  comm: number;
  bytes: number;
  fd: number;
  ret: number;
  syscall: number;
  target?: number; // store target id, 0 (the default) = unknown
  /** the syscall record type; sys_write by default */
  type?: SyscallRecordType;
  /** sys_read: response time, 0 (the default) = none */
  response?: number;
  /** sys_write: the key of the request it started, 0 (the default) = none */
  request?: number;
}

export interface BlockIoFields {
  tsOffset: number;
  dur: number;
  service: number;
  container?: number;
  ctx: number;
  pid: number;
  tid: number;
  comm: number;
  bytes: number;
  dev: number;
  sector: number;
  op: number;
  error: number;
}

// The data columns' typed arrays (tsOffset, dur, …) are the batch's own fields, made from the one table.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging, @typescript-eslint/no-empty-object-type
export interface EventBatch extends BatchArrays {}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class EventBatch {
  count = 0;
  baseTs = 0n;
  /** each row's record type: kreplay_batch's `types` argument, which gives the row count */
  readonly type: Uint8Array;

  /**
   * Columns live in `memory`, which may be a SharedArrayBuffer so that the
   * store's writer thread reads the very batch the decoder filled.
   */
  constructor(
    readonly capacity: number,
    readonly memory: ArrayBufferLike = new ArrayBuffer(EventBatch.bytesFor(capacity)),
  ) {
    Object.assign(this, batchArrays(memory, capacity));
    this.type = new Uint8Array(memory, batchArraysBytes(capacity), capacity);
  }

  /** Bytes of memory a batch of `capacity` rows needs. */
  static bytesFor(capacity: number): number {
    return batchArraysBytes(capacity) + paddedBytes(1, capacity);
  }

  get full(): boolean {
    return this.count === this.capacity;
  }

  clear(baseTs = 0n): void {
    this.count = 0;
    this.baseTs = baseTs;
  }

  /** At or before the earliest stamp of rows [from, to): baseTs, or a row's before it (rows of several CPUs come out of order). */
  minTs(from = 0, to = this.count): bigint {
    let min = 0;
    for (let i = from; i < to; i++) if (this.tsOffset[i]! < min) min = this.tsOffset[i]!;
    return this.baseTs + BigInt(min);
  }

  /** Reserves the next row for the decoder, which fills the columns itself. */
  append(type: number): number {
    if (this.count === this.capacity) throw new RangeError(`event batch is full (${this.capacity})`);
    const i = this.count++;
    this.type[i] = type;
    return i;
  }

  private pushCommon(type: number, f: SysWriteFields | BlockIoFields): number {
    const i = this.append(type);
    this.tsOffset[i] = f.tsOffset;
    this.dur[i] = f.dur;
    this.service[i] = serviceColumn(f.service, f.container ?? 0);
    this.ctx[i] = f.ctx;
    this.pid[i] = f.pid;
    this.tid[i] = f.tid;
    this.comm[i] = f.comm;
    this.bytes[i] = f.bytes;
    return i;
  }

  /** A syscall event: sys_write unless f.type says another. */
  pushSysWrite(f: SysWriteFields): void {
    const i = this.pushCommon(f.type ?? RecordType.SysWrite, f);
    this.handle[i] = f.fd;
    this.result[i] = f.ret;
    this.kind[i] = f.syscall;
    this.error[i] = 0;
    this.target[i] = f.target ?? 0;
    this.response[i] = f.response ?? f.request ?? 0;
  }

  /** Rows from `from` on that name target `id` name none now (its store row is gone); returns how many. */
  forgetTarget(id: number, from: number): number {
    let n = 0;
    for (let i = from; i < this.count; i++)
      if (this.target[i] === id) {
        this.target[i] = 0;
        n++;
      }
    return n;
  }

  pushBlockIo(f: BlockIoFields): void {
    const i = this.pushCommon(RecordType.BlockIo, f);
    this.handle[i] = f.dev;
    this.result[i] = f.sector;
    this.kind[i] = f.op;
    this.error[i] = f.error;
    this.target[i] = 0;
    this.response[i] = 0;
  }
}
