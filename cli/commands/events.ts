/** `kreplay events`: the GET /api/events query from the command line, every page of it. */
import { Option, type Command } from 'commander';
import { EVENT_TYPES, eventToJson, type ApiEvent } from '../../core/model';
import {
  parseDurationMsNs,
  parseEventTypes,
  parseTargetKinds,
  parseTargetPattern,
  parseText,
  parseTimeNs,
} from '../../daemon/http/query-values';
import { tableHeader, tableRow } from '../event-table';
import { authHeaders } from '../daemon-request';
import { baseUrlOption, integerOption, queryValueOption } from '../options';

interface EventsFlags {
  [queryFlag: string]: string | boolean | number | undefined;
  server: string;
  json: boolean;
  pageSize: number;
}

type QueryFlag = [flag: string, param: string, help: string, parse: (text: string) => unknown];

/** The flags that become query parameters, each checked by that parameter's own parser. */
export const QUERY_FLAGS: { option: Option; param: string }[] = (
  [
    ['--txn <id>', 'transaction_id', 'transaction_id', parseText],
    ['--trace <id>', 'trace_id', 'trace_id', parseText],
    ['--service <name>', 'service', 'service_name, exactly', parseText],
    ['--node <name>', 'node', 'node', parseText],
    [
      '--type <types>',
      'event_type',
      `${EVENT_TYPES.join(', ')}, or several comma-separated`,
      parseEventTypes,
    ],
    ['--from <time>', 'from', 'from this time on (epoch ns or RFC 3339)', parseTimeNs],
    ['--to <time>', 'to', 'before this time (epoch ns or RFC 3339)', parseTimeNs],
    [
      '--min-ms <ms>',
      'min_duration_ms',
      'only calls at least this long, or reads whose response wait is (decimal ms)',
      parseDurationMsNs,
    ],
    [
      '--target <target>',
      'target',
      'writes to this target; a trailing * matches a prefix',
      parseTargetPattern,
    ],
    [
      '--target-kind <kinds>',
      'target_kind',
      'file, socket, pipe, char, anon, other, comma-separated',
      parseTargetKinds,
    ],
  ] satisfies QueryFlag[]
).map(([flag, param, help, parse]) => ({
  option: new Option(flag, help).argParser(queryValueOption(parse)),
  param,
}));

interface EventsBody {
  events: ApiEvent[];
  next_cursor: string | null;
}

interface ProblemBody {
  title?: string;
  detail?: string;
  errors?: { param: string; message: string }[];
}

function describeProblem(status: number, text: string): string {
  let problem: ProblemBody;
  try {
    problem = JSON.parse(text) as ProblemBody;
  } catch {
    return `server answered ${status}: ${text.slice(0, 200)}`;
  }
  const lines = [`server answered ${status} ${problem.title ?? ''}: ${problem.detail ?? ''}`];
  for (const e of problem.errors ?? []) lines.push(`  ${e.param}: ${e.message}`);
  return lines.join('\n');
}

async function fetchPage(server: string, query: URLSearchParams): Promise<EventsBody> {
  let res: Response;
  try {
    res = await fetch(`${server}/api/events?${query}`, { headers: authHeaders() });
  } catch (err) {
    const cause = (err as { cause?: Error }).cause;
    throw new Error(`cannot reach ${server}: ${cause?.message ?? (err as Error).message}`, { cause: err });
  }
  const text = await res.text();
  if (!res.ok) throw new Error(describeProblem(res.status, text));
  const body = JSON.parse(text) as EventsBody;
  // int64=string keeps all 19 digits through JSON.parse
  for (const e of body.events) {
    e.timestamp_ns = BigInt(e.timestamp_ns);
    e.duration_ns = BigInt(e.duration_ns);
  }
  return body;
}

function write(text: string): Promise<void> {
  return new Promise((resolve) =>
    process.stdout.write(text) ? resolve() : process.stdout.once('drain', resolve),
  );
}

/** The query parameters the given filter flags stand for. */
export function queryOf(flags: Record<string, unknown>): URLSearchParams {
  const query = new URLSearchParams();
  for (const { option, param } of QUERY_FLAGS) {
    const value = flags[option.attributeName()];
    if (typeof value === 'string') query.set(param, value);
  }
  return query;
}

export async function runEvents(flags: EventsFlags): Promise<void> {
  // `kreplay events | head` closes the pipe early: that is not an error.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
  });
  const query = queryOf(flags);
  query.set('limit', String(flags.pageSize));
  query.set('int64', 'string');
  if (!flags.json) await write(tableHeader());
  let count = 0;
  for (;;) {
    const page = await fetchPage(flags.server, query);
    count += page.events.length;
    await write(page.events.map((e) => (flags.json ? `${eventToJson(e)}\n` : tableRow(e))).join(''));
    if (!page.next_cursor) break;
    query.set('cursor', page.next_cursor);
  }
  if (!flags.json) process.stderr.write(`${count} event${count === 1 ? '' : 's'}\n`);
}

export function registerEventsCommand(program: Command): void {
  const command = program
    .command('events')
    .description('query the daemon for events, following pages to the end');
  for (const { option } of QUERY_FLAGS) command.addOption(option);
  command
    .option('--server <url>', 'daemon base URL', baseUrlOption, 'http://127.0.0.1:7070')
    .option('--page-size <n>', 'events per request', integerOption(1, 10000), 1000)
    .option('--json', 'one JSON object per line (NDJSON) instead of a table', false)
    .action((flags: EventsFlags) => runEvents(flags));
}
