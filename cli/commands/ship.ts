/**
 * `kreplay ship --from NODE.db --to clickhouse://…`: backfills a node file
 * into the fleet store with the agent's own shipper (RowBinary batches, the
 * cursor in the file's ship_cursors moving only after ClickHouse took a
 * batch), so a kill loses nothing and a second run goes on where the first
 * stopped; a batch re-sent after a kill collapses like the agent's
 * (core/clickhouse/schema.ts). Progress on stderr: a bar on a terminal, a
 * line every 10 s otherwise.
 */
import type { Command } from 'commander';
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

export async function runShip(flags: ShipFlags): Promise<void> {
  const ch = clickhouseTarget(flags.to, flags.user, { flag: '--password-file', path: flags.passwordFile });
  // a node file as the agent left it (also one of an older schema: upgraded in place, as its agent would)
  const { db, info } = openReadStore(flags.from);
  db.close();
  openWriteStore(flags.from, info.node).db.close();
  const shipper = new Shipper(flags.from, ch, { batchRows: flags.batchRows, maxDelayMs: 0 });
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
    .description('backfill a node file into a ClickHouse fleet store (resumable: run again after a stop)')
    .requiredOption('--from <file>', 'the node file (NODE.db) to ship')
    .requiredOption(
      '--to <url>',
      'the fleet store: clickhouse://HOST:HTTP_PORT/DB[?cluster=NAME&timeout=SECONDS]',
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
