/**
 * Events on their way into the store, held column by column in typed arrays
 * that are reused from batch to batch: the hot path allocates no object per
 * event. Timestamps are exact: ts = baseTs + tsOffset[i], the offset a whole
 * number below 2^53.
 */
import { RecordType, type SyscallRecordType } from '../../core/model';

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
  target?: number; // store target id, 0 (the default) = unknown
  /** the syscall record type; sys_write by default */
  type?: SyscallRecordType;
  /** sys_read: response time, 0 (the default) = none */
  response?: number;
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
  /** syscall store target id, 0 = unknown */
  readonly target: Uint32Array;
  /** sys_read response_ns, 0 = none */
  readonly response: Float64Array;

  /**
   * Columns live in `memory`, which may be a SharedArrayBuffer so that the
   * store's writer thread reads the very batch the decoder filled.
   */
  constructor(
    readonly capacity: number,
    readonly memory: ArrayBufferLike = new ArrayBuffer(EventBatch.bytesFor(capacity)),
  ) {
    let offset = 0;
    const take = <T>(
      make: (buffer: ArrayBufferLike, offset: number, length: number) => T,
      width: number,
    ): T => {
      const view = make(memory, offset, capacity);
      offset += Math.ceil((capacity * width) / 8) * 8;
      return view;
    };
    this.tsOffset = take((b, o, n) => new Float64Array(b, o, n), 8);
    this.dur = take((b, o, n) => new Float64Array(b, o, n), 8);
    this.bytes = take((b, o, n) => new Float64Array(b, o, n), 8);
    this.handle = take((b, o, n) => new Float64Array(b, o, n), 8);
    this.result = take((b, o, n) => new Float64Array(b, o, n), 8);
    this.response = take((b, o, n) => new Float64Array(b, o, n), 8);
    this.service = take((b, o, n) => new Uint32Array(b, o, n), 4);
    this.ctx = take((b, o, n) => new Uint32Array(b, o, n), 4);
    this.pid = take((b, o, n) => new Uint32Array(b, o, n), 4);
    this.tid = take((b, o, n) => new Uint32Array(b, o, n), 4);
    this.comm = take((b, o, n) => new Uint32Array(b, o, n), 4);
    this.kind = take((b, o, n) => new Uint32Array(b, o, n), 4);
    this.error = take((b, o, n) => new Int32Array(b, o, n), 4);
    this.target = take((b, o, n) => new Uint32Array(b, o, n), 4);
    this.type = take((b, o, n) => new Uint8Array(b, o, n), 1);
  }

  /** Bytes of memory a batch of `capacity` rows needs. */
  static bytesFor(capacity: number): number {
    const padded = (width: number) => Math.ceil((capacity * width) / 8) * 8;
    return 6 * padded(8) + 8 * padded(4) + padded(1);
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

  /** A syscall event: sys_write unless f.type says another. */
  pushSysWrite(f: SysWriteFields): void {
    const i = this.pushCommon(f.type ?? RecordType.SysWrite, f);
    this.handle[i] = f.fd;
    this.result[i] = f.ret;
    this.kind[i] = f.syscall;
    this.error[i] = 0;
    this.target[i] = f.target ?? 0;
    this.response[i] = f.response ?? 0;
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
