/**
 * Decodes one ring-buffer batch (records back to back, each starting with
 * {u32 type, u32 size}) straight into an EventBatch: per event it reads a
 * few integers and does cached map lookups, and allocates nothing.
 */
import { KreplayError } from '../../core/errors';
// the modules themselves, not core/model's index: its re-exports are getters, run per field read (issue 46)
import {
  BlockIoLayout,
  COMM_LEN,
  ContextLayout,
  EVENT_CONTEXT_ONLY,
  EVENT_SAMPLE_IN_USER,
  EventLayout,
  readCString,
  readU53,
  viewI53,
  viewU53,
  recordBytes,
  RecordHead,
  recordProblem,
  RecordProblem,
  RecordType,
  REQUEST_DATA_LEN,
  RequestLayout,
  SyscallLayout,
  SYSCALL_FLAGS,
  type RecordProblemCode,
  TARGET_ID_WINDOW,
} from '../../core/model/record-layout';
import { blockStatusErrno, encodeDevice } from '../../core/model/event-types';
import { readTargetRecord, targetKindCode, targetText } from '../../core/model/target';
import { bytesAre } from '../attribution/context-parser';
import { hostPathOf } from '../attribution/host-path';
import { nativeAddon, type NativeRequestKeys } from '../../core/native/addon';
import type { ContextResolver } from '../attribution/context-resolver';
import { MAX_CONTAINER_ID, serviceColumn } from './batch-columns';
import type { ServiceResolver } from '../attribution/service-resolver';
import type { Dictionaries } from './dictionary';
import type { EventBatch } from './event-batch';

export class CorruptRecordError extends KreplayError {
  constructor(
    readonly offset: number,
    readonly lostBytes: number,
    reason: string,
  ) {
    super(
      'E_CORRUPT_RECORD',
      `corrupt record at byte ${offset} of a batch: ${reason}; dropped the ${lostBytes} bytes that follow`,
    );
  }
}

interface ThreadIds {
  pid: number;
  cgroupId: number;
  comm0: number;
  comm1: number;
  comm2: number;
  comm3: number;
  commId: number;
  /** the service's store id plus 2^32 times its container's (the batch's service column) */
  serviceId: number;
  /** the process runs in a container: its file paths are its own root's */
  inContainer: boolean;
}

const FILE_KIND = targetKindCode('file');

/** Where decoded events go: a batch, handed on (and replaced) by flush(). */
export interface BatchSink {
  readonly current: EventBatch;
  flush(): void;
}

const TWO_32 = 0x1_0000_0000;
/**
 * An HTTP/1 response's first bytes. A server's every response is the first send after a read on its
 * socket, so the kernel keeps its bytes as a request's; they ask nothing (request_key.h's shape
 * `unknown`, touching no connection's statements), so their key needs no native call.
 */
const HTTP_RESPONSE = 'HTTP/';

function corruptRecord(buf: Buffer, off: number, problem: RecordProblemCode): CorruptRecordError {
  if (problem === RecordProblem.TruncatedHead)
    return new CorruptRecordError(off, buf.length - off, 'truncated head');
  const type = buf.readUInt32LE(off);
  const size = buf.readUInt32LE(off + RecordHead.size);
  const reason =
    problem === RecordProblem.UnknownType
      ? `unknown record type ${type}`
      : problem === RecordProblem.PastEnd
        ? `${size}-byte record runs past the end of the batch`
        : `type ${type} with size ${size}, expected ${recordBytes(buf, off)}`;
  return new CorruptRecordError(off, buf.length - off, reason);
}

const MAX_CACHED_THREADS = 262144;
/* the kernel's target ids the decoder knows: twice the window it reuses one within (a power of two) */
const KERNEL_TARGET_SLOTS = 2 * TARGET_ID_WINDOW;
const KERNEL_TARGET_MASK = KERNEL_TARGET_SLOTS - 1;
/* kernel context id -> store context id, direct-mapped: a kernel id takes the slot of the one CACHED_CONTEXTS below it */
const CACHED_CONTEXTS = 2 ** 18;

export class RecordDecoder {
  private baseHi = 0;
  private baseLo = 0;
  private readonly threads = new Map<number, ThreadIds>();
  private readonly cachedKernelContexts = new Float64Array(CACHED_CONTEXTS);
  private readonly cachedStoreContexts = new Float64Array(CACHED_CONTEXTS);
  /* marks the store ids resolutions hold as this decoder's, until the store removes contexts */
  private storeToken = {};
  /*
   * kernel target id -> store target id, from the target records (always ahead of their events),
   * direct-mapped: an id takes the slot of the one KERNEL_TARGET_SLOTS below it, which the kernel no
   * longer hands to writes. Store id 0: defined, no write used it yet (its kind and text in the
   * pending slots: its store id depends on the writer's root). Slots, not a Map: a new file or
   * connection a request would grow and shrink a Map's table at every one.
   */
  private readonly kernelTargets = new Float64Array(KERNEL_TARGET_SLOTS);
  private readonly storeTargets = new Float64Array(KERNEL_TARGET_SLOTS);
  private readonly pendingKinds = new Uint32Array(KERNEL_TARGET_SLOTS);
  private readonly pendingTexts = Array.from({ length: KERNEL_TARGET_SLOTS }, (): string | null => null);
  /** file targets of processes in containers whose host path could not be told (kept as the container sees them) */
  unresolvedContainerPaths = 0;
  /** processes whose container went unsaid: the store already holds MAX_CONTAINER_ID containers */
  containersPastBound = 0;
  contextRecords = 0;
  targetRecords = 0;
  /** writes whose target id no target record defined (lost with a corrupt batch) */
  unknownTargets = 0;
  /** writes the kernel left to sample here that were left out (see keepWithoutContext) */
  sampledOut = 0;

  constructor(
    private readonly dictionaries: Dictionaries,
    private readonly services: ServiceResolver,
    private readonly contexts: ContextResolver,
    /** CLOCK_REALTIME - CLOCK_BOOTTIME, ns */
    private readonly clockOffsetNs: () => bigint,
    /** --sample-background 1/N: N */
    private readonly sampleBackground = 1,
    /**
     * what a request's first bytes ask, as a key, per connection: a prepared statement's execute is
     * its statement's (native/capture/request_key.h: one owner with the replay's relay)
     */
    private readonly requestKeys: NativeRequestKeys = new (nativeAddon().RequestKeys)(),
  ) {}

  /** the key native code gives an HTTP/1 response's bytes, asked of it once */
  private readonly responseKey = nativeAddon().requestKey(Buffer.from(HTTP_RESPONSE));

  /**
   * Appends the buffer's events to sink.current, flushing the sink whenever
   * that batch is full. Throws CorruptRecordError (after keeping every record
   * before the corrupt one) when a record's head cannot be trusted.
   */
  decode(buf: Buffer, sink: BatchSink): void {
    const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    let off = 0;
    while (off < buf.length) {
      const problem = recordProblem(buf, off);
      if (problem !== RecordProblem.None) throw corruptRecord(buf, off, problem);
      const type = view.getUint32(off, true);
      const size = view.getUint32(off + RecordHead.size, true);
      if (type === RecordType.Context) this.defineContext(buf, off);
      else if (type === RecordType.Target) this.defineTarget(buf, off);
      else {
        const ctx = this.storeContextId(viewU53(view, off + EventLayout.contextId));
        if (ctx !== 0 || this.keepWithoutContext(view, off, type)) {
          if (sink.current.full) sink.flush();
          this.appendEvent(buf, view, off, type, size, ctx, sink.current);
        }
      }
      off += size;
    }
  }

  /*
   * The kernel's flags on an event whose context turned out to hold no
   * transaction or trace: an excluded task's event was kept for its context
   * only (drop it), a write of a thread with a context escaped the kernel's
   * sampling (sample it here).
   */
  private keepWithoutContext(view: DataView, off: number, type: number): boolean {
    const flags = view.getUint32(
      off + (type === RecordType.BlockIo ? BlockIoLayout.flags : SyscallLayout.syscall),
      true,
    );
    if (flags & EVENT_CONTEXT_ONLY) return false;
    if (flags & EVENT_SAMPLE_IN_USER && Math.random() * this.sampleBackground >= 1) {
      this.sampledOut++;
      return false;
    }
    return true;
  }

  private defineContext(buf: Buffer, off: number): void {
    const len = Math.min(buf.readUInt32LE(off + ContextLayout.len), ContextLayout.bytes - ContextLayout.data);
    const data = buf.subarray(off + ContextLayout.data, off + ContextLayout.data + len);
    this.contexts.define(
      readU53(buf, off + ContextLayout.contextId),
      readU53(buf, off + ContextLayout.parentId),
      buf.readUInt32LE(off + ContextLayout.kind),
      data,
    );
    this.contextRecords++;
  }

  private defineTarget(buf: Buffer, off: number): void {
    const record = readTargetRecord(buf, off);
    const kernelId = record.targetId;
    this.targetRecords++;
    const slot = kernelId & KERNEL_TARGET_MASK;
    const held = this.kernelTargets[slot]!;
    // came after a newer one took its slot (two CPUs' records cross in the ring): no write names it
    if (held > kernelId) return;
    this.kernelTargets[slot] = kernelId;
    this.storeTargets[slot] = 0;
    this.pendingKinds[slot] = record.kind;
    this.pendingTexts[slot] = targetText(record);
  }

  /**
   * The store id of the target the kernel numbered `kernelId`, given at its first write: the kernel
   * numbers targets per thread, so its writer's root is the one root its path is in. A path in a
   * container's root is stored as the host's path to the same file, so that two containers' /out/x.log
   * are two targets (the event carries its container either way). The event's use of it, at
   * `tsOffset` with or without a context, goes with the batch (TargetDictionary.use).
   */
  private storeTargetId(kernelId: number, writer: ThreadIds, tsOffset: number, context: boolean): number {
    if (kernelId === 0) return 0;
    const slot = kernelId & KERNEL_TARGET_MASK;
    if (this.kernelTargets[slot] !== kernelId) {
      this.unknownTargets++;
      return 0;
    }
    const id = this.storeTargets[slot]!;
    if (id !== 0) {
      this.dictionaries.targets.useId(id, tsOffset, context);
      return id;
    }
    const kind = this.pendingKinds[slot]!;
    let text = this.pendingTexts[slot]!;
    this.pendingTexts[slot] = null;
    if (writer.inContainer && kind === FILE_KIND && text.startsWith('/')) {
      const host = hostPathOf(writer.pid, text);
      if (host === null) this.unresolvedContainerPaths++;
      else text = host;
    }
    const entry = this.dictionaries.targets.entry(kind, text);
    this.dictionaries.targets.use(entry, tsOffset, context);
    this.storeTargets[slot] = entry.id;
    return entry.id;
  }

  private appendEvent(
    buf: Buffer,
    v: DataView,
    off: number,
    type: number,
    size: number,
    ctx: number,
    out: EventBatch,
  ): void {
    const lo = v.getUint32(off + EventLayout.startNs, true);
    const hi = v.getUint32(off + EventLayout.startNs + 4, true);
    if (out.count === 0) {
      this.dictionaries.targets.batchStarted();
      this.baseHi = hi;
      this.baseLo = lo;
      out.clear((BigInt(hi) << 32n) + BigInt(lo) + this.clockOffsetNs());
    }
    const i = out.append(type);
    out.tsOffset[i] = (hi - this.baseHi) * TWO_32 + (lo - this.baseLo);
    out.dur[i] = viewU53(v, off + EventLayout.durationNs);
    const tid = v.getUint32(off + EventLayout.tid, true);
    const ids = this.threadIds(buf, v, off, tid);
    out.pid[i] = ids.pid;
    out.tid[i] = tid;
    out.comm[i] = ids.commId;
    out.service[i] = ids.serviceId;
    out.ctx[i] = ctx;
    if (type !== RecordType.BlockIo) {
      out.bytes[i] = viewU53(v, off + SyscallLayout.count);
      out.handle[i] = v.getInt32(off + SyscallLayout.fd, true);
      out.result[i] = viewI53(v, off + SyscallLayout.ret);
      out.kind[i] = v.getUint32(off + SyscallLayout.syscall, true) & ~SYSCALL_FLAGS;
      out.error[i] = 0;
      out.target[i] = this.storeTargetId(
        viewU53(v, off + SyscallLayout.targetId),
        ids,
        out.tsOffset[i]!,
        ctx !== 0,
      );
      // the column holds a read's response time, or a send's request key
      out.response[i] =
        size === RequestLayout.bytes
          ? this.requestKey(buf, v, off, ids.pid, out.handle[i]!, out.target[i]!)
          : viewU53(v, off + SyscallLayout.responseNs);
    } else {
      out.bytes[i] = v.getUint32(off + BlockIoLayout.bytes, true);
      out.handle[i] = encodeDevice(
        v.getUint32(off + BlockIoLayout.devMajor, true),
        v.getUint32(off + BlockIoLayout.devMinor, true),
      );
      out.result[i] = viewU53(v, off + BlockIoLayout.sector);
      out.kind[i] = v.getUint32(off + BlockIoLayout.op, true);
      out.error[i] = blockStatusErrno(v.getInt32(off + BlockIoLayout.status, true));
      out.target[i] = 0;
      out.response[i] = 0;
    }
  }

  /** The key of the request whose first bytes the send's record carries, on its connection (pid, fd, target). */
  private requestKey(buf: Buffer, v: DataView, off: number, pid: number, fd: number, target: number): number {
    const len = Math.min(v.getUint32(off + RequestLayout.len, true), REQUEST_DATA_LEN);
    const start = off + RequestLayout.data;
    if (len >= HTTP_RESPONSE.length && bytesAre(buf, start, HTTP_RESPONSE)) return this.responseKey;
    return this.requestKeys.key(`${pid}\t${fd}\t${target}`, buf.subarray(start, start + len));
  }

  /* comm and service per thread, re-resolved only when its pid, cgroup or comm bytes change (exec, reuse, move) */
  private threadIds(buf: Buffer, v: DataView, off: number, tid: number): ThreadIds {
    const pid = v.getUint32(off + EventLayout.pid, true);
    const c = off + EventLayout.comm;
    const c0 = v.getUint32(c, true);
    const c1 = v.getUint32(c + 4, true);
    const c2 = v.getUint32(c + 8, true);
    const c3 = v.getUint32(c + 12, true);
    const cgroupId = viewU53(v, off + EventLayout.cgroupId);
    const known = this.threads.get(tid);
    if (
      known &&
      known.pid === pid &&
      known.cgroupId === cgroupId &&
      known.comm0 === c0 &&
      known.comm1 === c1 &&
      known.comm2 === c2 &&
      known.comm3 === c3
    ) {
      return known;
    }
    const comm = readCString(buf, c, COMM_LEN);
    const { service, container } = this.services.identityOf({ pid, comm, cgroupId });
    let containerId = container ? this.dictionaries.containers.id(JSON.stringify(container)) : 0;
    if (containerId > MAX_CONTAINER_ID) {
      // past what the batch holds exactly: the events go without their container, counted
      this.containersPastBound++;
      containerId = 0;
    }
    const ids: ThreadIds = {
      pid,
      cgroupId,
      comm0: c0,
      comm1: c1,
      comm2: c2,
      comm3: c3,
      commId: this.dictionaries.comms.id(comm),
      serviceId: serviceColumn(this.dictionaries.services.id(service), containerId),
      inContainer: container !== null,
    };
    if (this.threads.size >= MAX_CACHED_THREADS) this.threads.clear();
    this.threads.set(tid, ids);
    return ids;
  }

  private storeContextId(kernelId: number): number {
    if (kernelId === 0) return 0;
    const slot = kernelId % CACHED_CONTEXTS;
    if (this.cachedKernelContexts[slot] === kernelId) return this.cachedStoreContexts[slot]!;
    const context = this.contexts.lookup(kernelId);
    let id = context.storeOwner === this.storeToken ? context.storeId : 0;
    if (id === 0) {
      // the dictionary keeps the resolution itself (its four fields never change), not a copy
      id = this.dictionaries.contexts.idOf(context);
      // 0 (no context, NO_CONTEXT among them: frozen) needs no dictionary anyway
      if (id !== 0) {
        context.storeId = id;
        context.storeOwner = this.storeToken;
      }
    }
    this.cachedKernelContexts[slot] = kernelId;
    this.cachedStoreContexts[slot] = id;
    return id;
  }

  /** The store removed contexts: ids cached for kernel contexts may be among them. */
  forgetContextIds(): void {
    this.cachedKernelContexts.fill(0);
    this.storeToken = {};
  }
}
