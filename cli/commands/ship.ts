/**
 * `kreplay ship --from NODE.db --to clickhouse://…`: backfills a node file
 * (or an incident file, below) into the fleet store with the agent's own shipper (RowBinary batches, the
 * cursor in the file's ship_cursors moving only after ClickHouse took a
 * batch), so a kill loses nothing and a second run goes on where the first
 * stopped; a batch re-sent after a kill collapses like the agent's
 * (core/clickhouse/schema.ts). Progress on stderr: a bar on a terminal, a
 * line every 10 s otherwise.
 */
import { closeSync, existsSync, openSync, readSync } from 'node:fs';
import type { Command } from 'commander';
import type { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { CLICKHOUSE_EVENT_COLUMNS, eventsTable, migrateClickHouse } from '../../core/clickhouse/schema';
import { readIncidentFile } from '../../core/incident';
import { eventToJson, parseEventId } from '../../core/model';
import { Shipper } from '../../agent/ship/shipper';
import { openReadStore, openWriteStore } from '../../core/store/schema';
import { clickhouseTarget } from '../clickhouse-target';
import { integerOption } from '../options';
import { untilSignal } from '../signals';
import { createLogger } from '../../core/log/logger';
import { ProgressLine } from '../progress-line';

interface ShipFlags {
  from: string;
  to: string;
  user?: string;
  passwordFile?: string;
  batchRows: number;
  giveUpAfter: number;
}

const DEFAULT_BATCH_ROWS = 50_000;
/** A backfill is attended: after this many failed tries in a row it stops (its cursor kept) and says why. */
const DEFAULT_GIVE_UP_AFTER = 8;
const POLL_MS = 200;

/** SQLite's file header: a node file; anything else is taken for an incident file. */
function isSqlite(path: string): boolean {
  try {
    const fd = openSync(path, 'r');
    try {
      const head = Buffer.alloc(16);
      return readSync(fd, head, 0, 16, 0) === 16 && head.toString('latin1') === 'SQLite format 3\0';
    } finally {
      closeSync(fd);
    }
  } catch {
    return false; // missing or unreadable: the node-file path names the problem
  }
}

/**
 * An incident file's events (core/incident), which keep their node-file ids:
 * a few thousand, encoded as JSONEachRow, the whole file again on a second
 * run (its copies collapse). A redacted file is refused: its events carry the
 * ids of the real ones, which it would replace.
 */
async function shipIncident(flags: ShipFlags, ch: ClickHouseHttp): Promise<void> {
  const incident = await readIncidentFile(flags.from);
  if (incident.header.redacted.length > 0)
    throw new Error(
      `${flags.from} is redacted (${incident.header.redacted.join(', ')}): its events keep the ids of the real ones, which it would replace in the fleet store; ship an unredacted export`,
    );
  await migrateClickHouse(ch);
  const table = eventsTable(ch.endpoint);
  const columns = CLICKHOUSE_EVENT_COLUMNS.map((c) => c.name).join(', ');
  const { events } = incident;
  const progress = new ProgressLine(process.stderr, `${flags.from} → ${ch.name}`, events.length);
  for (let from = 0; from < events.length; from += flags.batchRows) {
    let rows = '';
    for (const event of events.slice(from, from + flags.batchRows)) {
      const key = parseEventId(event.event_id);
      if (!key)
        throw new Error(
          `${flags.from}: event id ${JSON.stringify(event.event_id)} is not a kreplay event id`,
        );
      rows += eventToJson(event, false, { store_id: key.storeId, seq: key.seq }) + '\n';
    }
    await ch.exec(`INSERT INTO ${table} (${columns}) FORMAT JSONEachRow`, rows);
    progress.update(Math.min(events.length, from + flags.batchRows));
  }
  progress.finish(`shipped ${events.length} events of transaction ${incident.header.transaction_id}`);
}

export async function runShip(flags: ShipFlags): Promise<void> {
  const ch = clickhouseTarget(flags.to, flags.user, { flag: '--password-file', path: flags.passwordFile });
  if (!isSqlite(flags.from) && existsSync(flags.from)) return shipIncident(flags, ch);
  // a node file as the agent left it (also one of an older schema: upgraded in place, as its agent would)
  const { db, info } = openReadStore(flags.from);
  db.close();
  openWriteStore(flags.from, info.node).db.close();
  const batchRows = flags.batchRows;
  const shipper = new Shipper(flags.from, ch, { batchRows, maxBatchRows: batchRows, maxDelayMs: 0 });
  const start = shipper.status();
  const total = start.lagEvents;
  const progress = new ProgressLine(process.stderr, `${flags.from} → ${start.destination}`, total);
  const stop = untilSignal(createLogger({ component: 'ship', level: 'warn' }));
  let signal: NodeJS.Signals | null = null;
  void stop.then((s) => (signal = s));
  shipper.start();
  let failedInRow = 0;
  let retries = start.retries;
  let complete: boolean;
  try {
    for (;;) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      // not counting what is left on every poll: a backlog of millions takes a while to count
      const now = shipper.status(false);
      if (now.retries > retries) {
        failedInRow += now.retries - retries;
        retries = now.retries;
      } else if (now.state === 'shipping') failedInRow = 0;
      const done = now.shipped - start.shipped;
      progress.update(Math.min(total, done), now.state === 'retrying' ? `retrying: ${now.lastError}` : '');
      complete = done >= total && shipper.status().lagEvents === 0;
      if (complete || signal || failedInRow >= flags.giveUpAfter) break;
    }
  } finally {
    await shipper.stop();
  }
  const end = shipper.status();
  const done = end.shipped - start.shipped;
  progress.finish(
    complete
      ? `shipped ${done} events (${start.shipped} were there before)`
      : `stopped with ${Math.max(0, total - done)} events to go (${done} shipped); run the same command again to go on`,
  );
  if (signal) process.exitCode = 130;
  else if (!complete)
    throw new Error(
      `gave up after ${failedInRow} failed tries in a row: ${end.lastError ?? 'no error'}; the cursor is kept, run again to go on`,
    );
}

export function registerShipCommand(program: Command): Command {
  return program
    .command('ship')
    .description(
      'backfill a node file or an incident file into a ClickHouse fleet store (resumable: run again after a stop)',
    )
    .requiredOption('--from <file>', 'the node file (NODE.db) or incident file (.kri) to ship')
    .requiredOption(
      '--to <url>',
      'the fleet store: clickhouse://HOST:HTTP_PORT/DB[?cluster=NAME&timeout=SECONDS&compression=lz4|gzip|none]',
    )
    .option('--user <user>', 'ClickHouse user')
    .option('--password-file <file>', 'file holding the ClickHouse password (or set KREPLAY_SHIP_PASSWORD)')
    .option(
      '--batch-rows <n>',
      `events per INSERT (default ${DEFAULT_BATCH_ROWS})`,
      integerOption(1, 1_000_000),
      DEFAULT_BATCH_ROWS,
    )
    .option(
      '--give-up-after <tries>',
      `stop after this many failed tries in a row (default ${DEFAULT_GIVE_UP_AFTER}; retried with backoff from 0.5 s)`,
      integerOption(1, 1000),
      DEFAULT_GIVE_UP_AFTER,
    )
    .action((flags: ShipFlags) => runShip(flags));
}
