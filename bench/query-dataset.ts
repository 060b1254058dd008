/**
 * The query benchmark's data: node stores written through the agent's
 * StoreWriter, shaped like production: 200 services with a skewed load, 70%
 * of events without context, transactions as bursts of log-normal size,
 * half the traces spanning several transactions on every node, log-normal
 * durations, some block I/O. Cached under bench/out/ by its parameters,
 * since 10M events take minutes to write.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EventBatch } from '../agent/ingest/event-batch';
import { StoreWriter } from '../agent/store/store-writer';
import { targetKindCode } from '../core/model';

export interface DatasetParams {
  events: number;
  nodes: number;
  services: number;
}

export interface Dataset extends DatasetParams {
  dir: string;
  firstTs: bigint;
  spanNs: bigint;
}

// 2: writes carry file targets, four files per service
const FORMAT = 2;
/* also the fleet bench's: one hour of events from the same instant, written in batches of this size */
export const BATCH = 65536;
export const FIRST_TS = 1_795_340_000_000_000_000n;
export const SPAN_NS = 3_600_000_000_000n;
const CONCURRENT_TRANSACTIONS = 8;
const CONTEXT_SHARE = 0.3;
const BLOCK_SHARE = 0.12;
const FILE_KIND = targetKindCode('file');

/** mulberry32: small, seedable, good enough for synthetic load. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function logNormal(random: () => number, median: number, sigma: number): number {
  const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return median * Math.exp(sigma * normal);
}

interface Transaction {
  txn: string;
  trace: string;
  service: number;
  left: number;
}

function writeNode(dir: string, node: number, params: DatasetParams): void {
  const random = seeded(node + 1);
  const writer = StoreWriter.open(dir, `node-${node}`);
  const batch = new EventBatch(BATCH);
  const count = Math.floor(params.events / params.nodes);
  const meanGap = Number(SPAN_NS) / count;
  // a few services carry most of the load
  const pickService = () => Math.floor(params.services * random() ** 2);
  let nextTxn = 0;
  const startTransaction = (): Transaction => {
    const j = nextTxn++;
    return {
      txn: `txn-${node}-${j}`,
      // odd transactions share a trace with two neighbours on every node
      trace: j % 2 === 0 ? `tr-${node}-${j}` : `tr-x${Math.floor(j / 6)}`,
      service: pickService(),
      left: Math.max(1, Math.min(2000, Math.round(logNormal(random, 12, 1)))),
    };
  };
  const active = Array.from({ length: CONCURRENT_TRANSACTIONS }, startTransaction);
  let offset = 0;
  batch.clear(FIRST_TS);
  for (let i = 0; i < count; i++) {
    offset += Math.max(1, Math.round(-Math.log(1 - random()) * meanGap));
    let service: number;
    let ctx = 0;
    if (random() < CONTEXT_SHARE) {
      const slot = Math.floor(random() * active.length);
      const t = active[slot]!;
      service = t.service;
      ctx = writer.contexts.id(t.txn, t.trace);
      if (--t.left === 0) active[slot] = startTransaction();
    } else {
      service = pickService();
    }
    const block = random() < BLOCK_SHARE;
    const common = {
      tsOffset: offset,
      dur: Math.round(block ? logNormal(random, 400_000, 1) : logNormal(random, 15_000, 1.2)),
      service: writer.services.id(`service-${service}`),
      ctx,
      pid: 1000 + service,
      tid: 1000 + service + Math.floor(random() * 4),
      comm: writer.comms.id(`worker-${service % 50}`),
      bytes: 512 * (1 + Math.floor(random() * 16)),
    };
    if (block) {
      batch.pushBlockIo({
        ...common,
        dev: 8 * 0x100000,
        sector: Math.floor(random() * 1e9),
        op: 1,
        error: 0,
      });
    } else {
      const fd = 3 + Math.floor(random() * 4);
      const target = writer.targets.id(FILE_KIND, `/var/lib/service-${service}/${fd}.log`);
      batch.pushSysWrite({ ...common, fd, ret: common.bytes, syscall: 1, target });
    }
    if (batch.full) {
      writer.writeBatch(batch);
      batch.clear(FIRST_TS);
    }
  }
  writer.writeBatch(batch);
  writer.close();
}

/** The dataset for `params`, written unless a complete copy is cached. */
export function ensureDataset(outDir: string, params: DatasetParams, log: (msg: string) => void): Dataset {
  const dir = join(outDir, `query-v${FORMAT}-e${params.events}-n${params.nodes}-s${params.services}`);
  const marker = join(dir, 'complete.json');
  const dataset = { ...params, dir, firstTs: FIRST_TS, spanNs: SPAN_NS };
  if (existsSync(marker) && readFileSync(marker, 'utf8') === JSON.stringify(params)) {
    log(`reusing ${dir}`);
    return dataset;
  }
  rmSync(dir, { recursive: true, force: true });
  const started = Date.now();
  for (let node = 0; node < params.nodes; node++) {
    log(`writing node-${node}: ${Math.floor(params.events / params.nodes).toLocaleString('en-US')} events`);
    writeNode(dir, node, params);
  }
  log(`dataset written in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  writeFileSync(marker, JSON.stringify(params));
  return dataset;
}
