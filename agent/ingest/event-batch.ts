/**
 * Events on their way into the store, held column by column in typed arrays
 * that are reused from batch to batch: the hot path allocates no object per
 * event. Timestamps are exact: ts = baseTs + tsOffset[i], the offset a whole
 * number below 2^53.
 */
import { RecordType } from '../model';

export interface SysWriteFields {
  tsOffset: number;
  dur: number;
  service: number;
  ctx: number; // store context id, 0 = none
  pid: number;
  tid: number;
  comm: number;
  bytes: number;
  fd: number;
  ret: number;
  syscall: number;
}

export interface BlockIoFields {
  tsOffset: number;
  dur: number;
  service: number;
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

export class EventBatch {
  count = 0;
  baseTs = 0n;
  readonly type: Uint8Array;
  readonly tsOffset: Float64Array;
  readonly dur: Float64Array;
  readonly service: Uint32Array;
  readonly ctx: Uint32Array;
  readonly pid: Uint32Array;
  readonly tid: Uint32Array;
  readonly comm: Uint32Array;
  readonly bytes: Float64Array;
  /** fd for sys_write, dev for block_io */
  readonly handle: Float64Array;
  /** ret for sys_write, sector for block_io */
  readonly result: Float64Array;
  /** syscall for sys_write, op for block_io */
  readonly kind: Uint32Array;
  /** block_io error (negative errno) */
  readonly error: Int32Array;

  constructor(readonly capacity: number) {
    this.type = new Uint8Array(capacity);
    this.tsOffset = new Float64Array(capacity);
    this.dur = new Float64Array(capacity);
    this.service = new Uint32Array(capacity);
    this.ctx = new Uint32Array(capacity);
    this.pid = new Uint32Array(capacity);
    this.tid = new Uint32Array(capacity);
    this.comm = new Uint32Array(capacity);
    this.bytes = new Float64Array(capacity);
    this.handle = new Float64Array(capacity);
    this.result = new Float64Array(capacity);
    this.kind = new Uint32Array(capacity);
    this.error = new Int32Array(capacity);
  }

  get full(): boolean {
    return this.count === this.capacity;
  }

  clear(baseTs = 0n): void {
    this.count = 0;
    this.baseTs = baseTs;
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
    this.service[i] = f.service;
    this.ctx[i] = f.ctx;
    this.pid[i] = f.pid;
    this.tid[i] = f.tid;
    this.comm[i] = f.comm;
    this.bytes[i] = f.bytes;
    return i;
  }

  pushSysWrite(f: SysWriteFields): void {
    const i = this.pushCommon(RecordType.SysWrite, f);
    this.handle[i] = f.fd;
    this.result[i] = f.ret;
    this.kind[i] = f.syscall;
    this.error[i] = 0;
  }

  pushBlockIo(f: BlockIoFields): void {
    const i = this.pushCommon(RecordType.BlockIo, f);
    this.handle[i] = f.dev;
    this.result[i] = f.sector;
    this.kind[i] = f.op;
    this.error[i] = f.error;
  }
}
