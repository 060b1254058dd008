/**
 * Events in (timestamp_ns, event_id) order -> Chrome trace-event JSON text
 * (the format Perfetto UI and chrome://tracing open), written piece by piece
 * so a million events never sit in memory at once.
 *
 * Tracks: a process per (node, pid) named "service (comm pid) @ node" with a
 * thread per tid, each sys_write a complete slice ("X") on its thread; a
 * process per (node, block device) whose requests are async slices
 * ("b"/"e", id = event_id), since requests to one device overlap.
 *
 * Flows: a block_io record carries the pid/tid of the task that submitted the
 * request (block_io_start runs in the submitter's context) and its issue
 * time. A request whose thread is inside a write when it is issued was
 * submitted by that write (O_DIRECT, O_SYNC, a write that hit dirty limits):
 * it gets a flow arrow from the write. Writeback that a kernel flusher
 * thread submits later names the flusher, not the writer, so it is not tied.
 *
 * To know whether a write starts a flow before writing it, and to keep every
 * track's events in ts order, a write's slice and a request's end wait until
 * the stream has passed their end time (a heap of what is still open).
 */
import type { ApiEvent, BlockIoEvent, SyscallEvent } from '../../../core/model';
import { Heap } from '../../store/source-heap';

/** Real pids and tids stay below PID_MAX_LIMIT (2^22); ids made up for collisions and devices start there. */
const SYNTHETIC_BASE = 1 << 22;

/** ns -> µs with the ns kept as three exact fraction digits. */
export function microsText(ns: bigint): string {
  const sign = ns < 0n ? '-' : '';
  const abs = ns < 0n ? -ns : ns;
  return `${sign}${abs / 1000n}.${(abs % 1000n).toString().padStart(3, '0')}`;
}

const json = (value: string | number | null): string =>
  typeof value === 'string' ? JSON.stringify(value) : String(value);

/** Pids (or tids) as the trace shows them: the real number for the first node that uses it, a made-up one for others. */
class IdSpace {
  private readonly byKey = new Map<string, number>();
  private readonly used = new Set<number>();
  constructor(private next: number) {}

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  claim(key: string, preferred: number | null): number {
    let id = this.byKey.get(key);
    if (id !== undefined) return id;
    id = preferred !== null && !this.used.has(preferred) ? preferred : this.next++;
    this.byKey.set(key, id);
    this.used.add(id);
    return id;
  }
}

interface OpenWrite {
  /** the write's end */
  at: bigint;
  event: SyscallEvent;
  pid: number;
  tid: number;
  flowId: number | null;
}
interface OpenRequest {
  /** the request's completion */
  at: bigint;
  event: BlockIoEvent;
  pid: number;
}
type Open = { kind: 'write'; item: OpenWrite } | { kind: 'request'; item: OpenRequest };

export class ChromeTraceWriter {
  private readonly pids = new IdSpace(SYNTHETIC_BASE);
  private readonly tids = new IdSpace(SYNTHETIC_BASE);
  private readonly open = new Heap<Open>((a, b) => a.item.at < b.item.at);
  /** the write each thread is in, while it is open */
  private readonly inWrite = new Map<string, OpenWrite>();
  private nextFlow = 1;
  private first = true;
  /** block requests tied to a write so far */
  flows = 0;

  /** Text before the first event. */
  begin(): string {
    return '{"displayTimeUnit":"ns","traceEvents":[\n';
  }

  /** Text for one event (and whatever it closes); events must come in ts order. */
  add(event: ApiEvent): string {
    let out = this.release(event.timestamp_ns, false);
    if (event.event_type === 'block_io') out += this.addRequest(event);
    else out += this.addWrite(event);
    return out;
  }

  /** Text after the last event: what is still open, and the end of the document. */
  end(otherData: Record<string, string | number>): string {
    const fields = Object.entries(otherData).map(([k, v]) => `${json(k)}:${json(v)}`);
    return `${this.release(0n, true)}\n],"otherData":{${fields.join(',')}}}\n`;
  }

  private line(text: string): string {
    const sep = this.first ? '' : ',\n';
    this.first = false;
    return sep + text;
  }

  private metadata(kind: 'process_name' | 'thread_name', pid: number, tid: number, name: string): string {
    return this.line(`{"ph":"M","name":"${kind}","pid":${pid},"tid":${tid},"args":{"name":${json(name)}}}`);
  }

  private release(upTo: bigint, all: boolean): string {
    let out = '';
    for (;;) {
      const top = this.open.pop();
      if (!top) break;
      if (!all && top.item.at >= upTo) {
        this.open.push(top);
        break;
      }
      out += top.kind === 'write' ? this.writeSlice(top.item) : this.requestEnd(top.item);
    }
    return out;
  }

  private threadKey(e: ApiEvent): string {
    return `${e.node}\0${e.pid}\0${e.tid}`;
  }

  private addWrite(e: SyscallEvent): string {
    let out = '';
    const processKey = `${e.node}\0${e.pid}`;
    const newProcess = !this.pids.has(processKey);
    const pid = this.pids.claim(processKey, e.pid);
    if (newProcess)
      out += this.metadata('process_name', pid, pid, `${e.service_name} (${e.comm} ${e.pid}) @ ${e.node}`);
    const threadKey = this.threadKey(e);
    const newThread = !this.tids.has(threadKey);
    const tid = this.tids.claim(threadKey, e.tid);
    if (newThread) out += this.metadata('thread_name', pid, tid, `${e.comm} ${e.tid}`);
    const write: OpenWrite = {
      at: e.timestamp_ns + e.duration_ns,
      event: e,
      pid,
      tid,
      flowId: null,
    };
    this.inWrite.set(threadKey, write);
    this.open.push({ kind: 'write', item: write });
    return out;
  }

  private writeSlice(w: OpenWrite): string {
    const e = w.event;
    if (this.inWrite.get(this.threadKey(e)) === w) this.inWrite.delete(this.threadKey(e));
    let args = `"syscall":${json(e.syscall)},"fd":${e.fd}`;
    if (e.target !== null) args += `,"target":${json(e.target)},"target_kind":${json(e.target_kind)}`;
    args += `,"bytes":${e.bytes},"ret":${e.ret},"event_id":"${e.event_id}"`;
    if (e.event_type === 'sys_read' && e.response_ns !== null) args += `,"response_ns":"${e.response_ns}"`;
    const flow = w.flowId === null ? '' : `,"bind_id":${w.flowId},"flow_out":true`;
    return this.line(
      `{"ph":"X","cat":"${e.event_type}","name":${json(e.syscall)},"pid":${w.pid},"tid":${w.tid}` +
        `,"ts":${microsText(e.timestamp_ns)},"dur":${microsText(e.duration_ns)}${flow},"args":{${args}}}`,
    );
  }

  private addRequest(e: BlockIoEvent): string {
    let out = '';
    const deviceKey = `${e.node}\0dev\0${e.device}`;
    const newDevice = !this.pids.has(deviceKey);
    const pid = this.pids.claim(deviceKey, null);
    if (newDevice) {
      out += this.metadata('process_name', pid, pid, `block ${e.device} @ ${e.node}`);
      out += this.metadata('thread_name', pid, pid, `requests ${e.device}`);
    }
    // the submitting thread is inside a write that has not ended yet: that write submitted it
    const write = this.inWrite.get(this.threadKey(e));
    let flow = '';
    if (write && e.timestamp_ns >= write.event.timestamp_ns && e.timestamp_ns <= write.at) {
      write.flowId ??= this.nextFlow++;
      flow = `,"bind_id":${write.flowId},"flow_in":true`;
      this.flows++;
    }
    const args =
      `"device":${json(e.device)},"op":${json(e.op)},"sector":${e.sector},"bytes":${e.bytes}` +
      `,"error":${e.error},"submitter":${json(`${e.comm} ${e.pid}/${e.tid}`)},"event_id":"${e.event_id}"`;
    out += this.line(
      `{"ph":"b","cat":"block_io","name":${json(e.op)},"id":"${e.event_id}","pid":${pid},"tid":${pid}` +
        `,"ts":${microsText(e.timestamp_ns)}${flow},"args":{${args}}}`,
    );
    this.open.push({ kind: 'request', item: { at: e.timestamp_ns + e.duration_ns, event: e, pid } });
    return out;
  }

  private requestEnd(r: OpenRequest): string {
    const e = r.event;
    return this.line(
      `{"ph":"e","cat":"block_io","name":${json(e.op)},"id":"${e.event_id}","pid":${r.pid},"tid":${r.pid}` +
        `,"ts":${microsText(r.at)}}`,
    );
  }
}
