/**
 * A realistic stream of kernel records for the ingest benchmark: 200
 * services, 70% of events without context, transactions in bursts, log-normal
 * durations, 5% block I/O, writes to one of 5 files per service (a target
 * record before each file's first write). Built once, replayed as
 * ring-buffer-sized batches.
 */
import { ContextKind, targetKindCode } from '../core/model';
import { blockIoRecord, contextRecord, fileTargetRecord, sysWriteRecord } from '../core/model/record-encoder';

export interface SyntheticStream {
  batches: Buffer[];
  events: number;
}

/* pids far above pid_max, so service resolution falls back to the comm as for exited processes */
const PID_BASE = 5_000_000;
const FILE = targetKindCode('file');

export function buildSyntheticStream(
  events: number,
  batchEvents = 8192,
  services = 200,
  seed = 1,
): SyntheticStream {
  let state = seed;
  const random = () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x80000000;
  };
  // log-normal: median ~2 us, a few percent of writes beyond 100 us
  const duration = () =>
    Math.floor(
      Math.exp(7.5 + 1.5 * Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random())),
    );
  const batches: Buffer[] = [];
  let pending: Buffer[] = [];
  let inBatch = 0;
  let ts = 1_000_000_000_000n;
  let nextContext = 1;
  let burstLeft = 0;
  let burstService = 0;
  let burstContext = 0;
  const targetIds = new Map<string, number>();
  for (let i = 0; i < events; i++) {
    ts += BigInt(1 + Math.floor(random() * 2000));
    if (burstLeft === 0 && random() < 0.3 / 150) {
      burstLeft = 150;
      burstService = Math.floor(random() * services);
      burstContext = nextContext++;
      pending.push(
        contextRecord({
          contextId: burstContext,
          parentId: 0,
          kind: ContextKind.Marker,
          data: `KREPLAY-CTX txn=txn-${burstContext} trace=tr-${burstContext >> 2}`,
        }),
      );
    }
    const inBurst = burstLeft > 0;
    if (inBurst) burstLeft--;
    const service = inBurst ? burstService : Math.floor(random() * services);
    const common = {
      startNs: ts,
      durationNs: duration(),
      pid: PID_BASE + service,
      tid: PID_BASE + service * 8 + Math.floor(random() * 8),
      comm: `svc-${service}`,
      contextId: inBurst ? burstContext : 0,
    };
    if (random() < 0.05) {
      pending.push(
        blockIoRecord({
          ...common,
          durationNs: 50_000 + duration() * 20,
          sector: Math.floor(random() * 1e9),
          bytes: 4096,
          major: 254,
          minor: 0,
          op: 1,
          status: 0,
        }),
      );
    } else {
      const fd = 3 + (i % 5);
      const key = `${service}:${fd}`;
      let targetId = targetIds.get(key);
      if (targetId === undefined) {
        // a file's record comes before its first write, as the kernel sends it
        targetId = targetIds.size + 1;
        targetIds.set(key, targetId);
        pending.push(fileTargetRecord({ targetId, kind: FILE, path: `/var/lib/svc-${service}/${fd}.log` }));
      }
      pending.push(sysWriteRecord({ ...common, fd, count: 512, ret: 512, syscall: 1, targetId }));
    }
    if (++inBatch === batchEvents) {
      batches.push(Buffer.concat(pending));
      pending = [];
      inBatch = 0;
    }
  }
  if (pending.length) batches.push(Buffer.concat(pending));
  return { batches, events };
}
