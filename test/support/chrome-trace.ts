/**
 * A strict reader of Chrome trace-event JSON (the JSON object form), as a
 * viewer would load it, plus the structural checks the export promises:
 * complete slices nest per thread, async begin/end pairs match by id, ts
 * never goes back on a track, every flow end has a start. Times are read
 * from the number's own digits (JSON.parse source text), never through a
 * double, so exact nanoseconds can be compared.
 */
export interface TraceEvent {
  ph: string;
  name?: string;
  cat?: string;
  pid: number;
  tid: number;
  id?: string;
  /** exact nanoseconds, from the µs text */
  tsNs?: bigint;
  durNs?: bigint;
  bind_id?: number;
  flow_in?: boolean;
  flow_out?: boolean;
  args?: Record<string, unknown>;
}

export interface Trace {
  events: TraceEvent[];
  otherData: Record<string, unknown>;
  processNames: Map<number, string>;
  threadNames: Map<string, string>;
}

/** "1795345678123456.789" µs -> 1795345678123456789n ns */
function microsToNs(text: string): bigint {
  const m = /^(-?)(\d+)(?:\.(\d{1,3}))?$/.exec(text);
  if (!m) throw new Error(`not µs with at most ns precision: ${text}`);
  const ns = BigInt(m[2]!) * 1000n + BigInt((m[3] ?? '').padEnd(3, '0'));
  return m[1] ? -ns : ns;
}

type Reviver = (this: unknown, key: string, value: unknown, context?: { source?: string }) => unknown;

export function parseChromeTrace(text: string): Trace {
  const reviver: Reviver = (key, value, context) =>
    (key === 'ts' || key === 'dur') && typeof value === 'number'
      ? { exact: microsToNs(context!.source!) }
      : value;
  const doc = JSON.parse(text, reviver as never) as {
    traceEvents?: unknown[];
    otherData?: Record<string, unknown>;
  };
  if (!Array.isArray(doc.traceEvents)) throw new Error('no traceEvents array');
  const trace: Trace = {
    events: [],
    otherData: doc.otherData ?? {},
    processNames: new Map(),
    threadNames: new Map(),
  };
  for (const raw of doc.traceEvents as Record<string, unknown>[]) {
    const { ts, dur, ...rest } = raw as { ts?: { exact: bigint }; dur?: { exact: bigint } };
    const event = rest as unknown as TraceEvent;
    if (typeof event.ph !== 'string' || !Number.isInteger(event.pid) || !Number.isInteger(event.tid))
      throw new Error(`event without ph/pid/tid: ${JSON.stringify(raw)}`);
    if (ts) event.tsNs = ts.exact;
    if (dur) event.durNs = dur.exact;
    if (event.ph === 'M') {
      const name = (event.args as { name: string }).name;
      if (event.name === 'process_name') trace.processNames.set(event.pid, name);
      if (event.name === 'thread_name') trace.threadNames.set(`${event.pid}/${event.tid}`, name);
      continue;
    }
    if (event.tsNs === undefined) throw new Error(`event without ts: ${JSON.stringify(raw)}`);
    trace.events.push(event);
  }
  return trace;
}

/** Every structural promise of the export; throws naming the first one broken. */
export function checkTrace(trace: Trace): void {
  const lastTs = new Map<string, bigint>();
  const openSlices = new Map<string, bigint[]>(); // thread -> stack of end times
  const openAsync = new Map<string, TraceEvent>();
  const flowOuts = new Set<number>();
  const flowIns: number[] = [];
  const asyncIds = new Set<string>();
  for (const e of trace.events) {
    const track = e.ph === 'X' ? `thread ${e.pid}/${e.tid}` : `async ${e.pid}`;
    const previous = lastTs.get(track);
    if (previous !== undefined && e.tsNs! < previous) throw new Error(`ts goes back on ${track}`);
    lastTs.set(track, e.tsNs!);
    if (e.ph === 'X') {
      if (e.durNs === undefined || e.durNs < 0n) throw new Error('complete slice without dur');
      const stack = openSlices.get(track) ?? [];
      while (stack.length && stack.at(-1)! <= e.tsNs!) stack.pop();
      const end = e.tsNs! + e.durNs;
      if (stack.length && end > stack.at(-1)!) throw new Error(`slice overlaps its parent on ${track}`);
      stack.push(end);
      openSlices.set(track, stack);
      if (e.flow_out) flowOuts.add(e.bind_id!);
    } else if (e.ph === 'b') {
      const id = e.id;
      if (!id) throw new Error('async begin without id');
      if (asyncIds.has(id)) throw new Error(`async id ${id} used twice`);
      asyncIds.add(id);
      openAsync.set(id, e);
      if (e.flow_in) flowIns.push(e.bind_id!);
    } else if (e.ph === 'e') {
      const begin = e.id && openAsync.get(e.id);
      if (!begin) throw new Error(`async end without begin: ${e.id}`);
      if (begin.name !== e.name || begin.cat !== e.cat || begin.pid !== e.pid)
        throw new Error(`async end ${e.id} does not match its begin`);
      if (e.tsNs! < begin.tsNs!) throw new Error(`async ${e.id} ends before it begins`);
      openAsync.delete(e.id!);
    } else throw new Error(`unexpected phase ${e.ph}`);
  }
  if (openAsync.size) throw new Error(`${openAsync.size} async slices never end`);
  for (const id of flowIns) if (!flowOuts.has(id)) throw new Error(`flow ${id} ends without a start`);
}
