/** `kreplay export TXN -o incident.json`: a transaction (or any event filter) as a Chrome trace file for Perfetto. */
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Command } from 'commander';
import { authHeaders, problemText, unreachable } from '../daemon-request';
import { baseUrlOption, queryValueOption } from '../options';
import { parseText } from '../../daemon/http/query-values';
import { QUERY_FLAGS, queryOf } from './events';

interface ExportFlags {
  [queryFlag: string]: string | undefined;
  server: string;
  output?: string;
}

export async function runExport(transactionId: string | undefined, flags: ExportFlags): Promise<void> {
  const query = queryOf(flags);
  if (transactionId !== undefined) query.set('transaction_id', transactionId);
  query.set('format', 'chrome-trace');
  const url = `${flags.server}/api/events/export?${query}`;
  let res: Response;
  try {
    res = await fetch(url, { headers: authHeaders() });
  } catch (err) {
    throw unreachable(url, err);
  }
  if (!res.ok || !res.body) throw new Error(problemText(res.status, await res.text()));
  const body = Readable.fromWeb(res.body as never);
  if (!flags.output || flags.output === '-') {
    await pipeline(body, process.stdout as Writable, { end: false });
    return;
  }
  // written beside the target and renamed at the end: a cut stream leaves no half file behind
  const partial = `${flags.output}.partial`;
  try {
    await pipeline(body, createWriteStream(partial));
    await rename(partial, flags.output);
  } catch (err) {
    await rm(partial, { force: true });
    throw new Error(`export to ${flags.output} failed: ${(err as Error).message}`, { cause: err });
  }
  process.stderr.write(`wrote ${flags.output} (open it in https://ui.perfetto.dev or chrome://tracing)\n`);
}

export function registerExportCommand(program: Command): void {
  const command = program
    .command('export')
    .description('export a transaction (or any event filter) as a Chrome trace file for Perfetto UI')
    .argument('[transaction_id]', 'the transaction to export', queryValueOption(parseText));
  for (const { option } of QUERY_FLAGS) if (option.attributeName() !== 'txn') command.addOption(option);
  command
    .option('-o, --output <file>', 'write here instead of stdout')
    .option('--server <url>', 'daemon base URL', baseUrlOption, 'http://127.0.0.1:7070')
    .action((txn: string | undefined, flags: ExportFlags) => runExport(txn, flags));
}
