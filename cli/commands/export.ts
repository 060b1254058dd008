/**
 * `kreplay export TXN -o incident.json`: a transaction (or any event filter) as a Chrome trace file
 * for Perfetto; `--format otlp`: as an OTLP/JSON file a trace viewer opens; `--format incident -o
 * FILE.kri`: a transaction as an incident file (core/incident).
 */
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { Readable, Transform, type TransformCallback, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { authHeaders, problemText, unreachable } from '../daemon-request';
import { baseUrlOption, queryValueOption } from '../options';
import { parseRedactKinds, parseText } from '../../daemon/http/query-values';
import { EXPORT_FORMATS } from '../../daemon/events/export/export-formats';
import { decodeIncident, writeIncidentFile } from '../../core/incident';
import { QUERY_FLAGS, queryOf } from './events';

interface ExportFlags {
  [queryFlag: string]: string | undefined;
  server: string;
  output?: string;
  format: (typeof EXPORT_FORMATS)[number];
  redact?: string;
}

async function request(url: string): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url, { headers: authHeaders() });
  } catch (err) {
    throw unreachable(url, err);
  }
  if (!res.ok || !res.body) throw new Error(problemText(res.status, await res.text()));
  return res;
}

/** The incident file of `transactionId`, checked whole, then written (or left alone when only its export time differs). */
async function exportIncident(transactionId: string | undefined, flags: ExportFlags): Promise<void> {
  const { format: _format, server: _server, output, redact, ...filters } = flags;
  if (transactionId === undefined)
    throw new InvalidArgumentError('--format incident exports one transaction: give its id');
  const narrowed = Object.keys(filters).filter((key) => filters[key] !== undefined);
  if (narrowed.length > 0)
    throw new InvalidArgumentError(
      `--format incident holds the whole transaction: drop ${narrowed.map((k) => `--${k}`).join(', ')}`,
    );
  if (output === undefined)
    throw new InvalidArgumentError('--format incident writes a file: give -o FILE (or -o - for stdout)');
  const query = new URLSearchParams({ format: 'incident', transaction_id: transactionId });
  if (redact !== undefined) query.set('redact', redact);
  // the reproducible-builds convention: the export time is the one input that differs between exports
  const epoch = process.env.SOURCE_DATE_EPOCH;
  if (epoch !== undefined) {
    if (!/^\d{1,12}$/.test(epoch))
      throw new InvalidArgumentError(
        `SOURCE_DATE_EPOCH must be whole seconds since the epoch, got "${epoch}"`,
      );
    query.set('source_date_epoch', epoch);
  }
  const url = `${flags.server}/api/events/export?${query}`;
  const bytes = Buffer.from(await (await request(url)).arrayBuffer());
  // nothing is written unless the whole file reads back
  const incident = decodeIncident(bytes, `the daemon's answer to ${url}`);
  if (output === '-') {
    process.stdout.write(bytes);
    return;
  }
  const what = `${incident.header.events} events, ${incident.header.digest}`;
  if (await writeIncidentFile(output, bytes)) process.stderr.write(`wrote ${output} (${what})\n`);
  else process.stderr.write(`${output} unchanged: it holds the same incident (${what}), exported earlier\n`);
}

/** Counts the spans of an OTLP/JSON stream as it passes: each span has one "spanId" key. */
class SpanCounter extends Transform {
  spans = 0;
  private tail = '';

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const text = this.tail + chunk.toString('latin1');
    this.spans += text.split(SPAN_ID_KEY).length - 1;
    this.tail = text.slice(-(SPAN_ID_KEY.length - 1));
    done(null, chunk);
  }
}
const SPAN_ID_KEY = '"spanId":';

export async function runExport(transactionId: string | undefined, flags: ExportFlags): Promise<void> {
  if (flags.format === 'incident') return exportIncident(transactionId, flags);
  if (flags.redact !== undefined)
    throw new InvalidArgumentError('--redact applies to --format incident only');
  const query = queryOf(flags);
  if (transactionId !== undefined) query.set('transaction_id', transactionId);
  query.set('format', flags.format);
  const url = `${flags.server}/api/events/export?${query}`;
  const res = await request(url);
  const counter = new SpanCounter();
  const body = Readable.fromWeb(res.body as never).pipe(counter);
  if (!flags.output || flags.output === '-') {
    await pipeline(body, process.stdout as Writable, { end: false });
  } else {
    // written beside the target and renamed at the end: a cut stream leaves no half file behind
    const partial = `${flags.output}.partial`;
    try {
      await pipeline(body, createWriteStream(partial));
      await rename(partial, flags.output);
    } catch (err) {
      await rm(partial, { force: true });
      throw new Error(`export to ${flags.output} failed: ${(err as Error).message}`, { cause: err });
    }
  }
  const where = !flags.output || flags.output === '-' ? 'stdout' : flags.output;
  if (flags.format === 'chrome-trace') {
    if (where !== 'stdout')
      process.stderr.write(`wrote ${where} (open it in https://ui.perfetto.dev or chrome://tracing)\n`);
    return;
  }
  // never silently short: the events of no W3C trace are said, not hidden
  const events = Number(res.headers.get('x-kreplay-events') ?? counter.spans);
  const left = Math.max(0, events - counter.spans);
  process.stderr.write(
    `wrote ${where} (${counter.spans} spans, OTLP/JSON: open it in a trace viewer or send it to an OTLP receiver)` +
      (left > 0
        ? `; ${left} of the ${events} events carried no W3C trace id (a KREPLAY-CTX marker's context or none) and are not in it\n`
        : '\n'),
  );
}

export function registerExportCommand(program: Command): void {
  const command = program
    .command('export')
    .description(
      'export a transaction (or any event filter) as a Chrome trace file for Perfetto UI, as OTLP/JSON spans (--format otlp), or a transaction as an incident file (--format incident)',
    )
    .argument('[transaction_id]', 'the transaction to export', queryValueOption(parseText));
  for (const { option } of QUERY_FLAGS) if (option.attributeName() !== 'txn') command.addOption(option);
  command
    .option('-o, --output <file>', 'write here instead of stdout')
    .addOption(
      new Option(
        '--format <format>',
        'chrome-trace; otlp: OTLP/JSON spans a trace viewer opens (docs/query.md "OTLP"); or incident: one file a replay needs (docs/query.md "Incident files")',
      )
        .choices(EXPORT_FORMATS)
        .default('chrome-trace'),
    )
    .option(
      '--redact <kinds>',
      'incident: replace paths, peers, services (comma-separated) with stable tokens',
      queryValueOption(parseRedactKinds),
    )
    .option('--server <url>', 'daemon base URL', baseUrlOption, 'http://127.0.0.1:7070')
    .action((txn: string | undefined, flags: ExportFlags) => runExport(txn, flags));
}
