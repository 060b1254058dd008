/**
 * `kreplay session list|show|play|pause|seek|stop`: the daemon's replay
 * sessions from the command line (those `kreplay replay` creates too), each
 * command one request to /api/replay/sessions.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { requestJson } from '../daemon-request';
import { formatNs } from '../exec/exec-report';
import { baseUrlOption } from '../options';
import { sessionLinks } from '../session-links';
import { formatTable } from '../text-table';

interface Session {
  id: string;
  transaction_id: string;
  speed_factor: number;
  extra_latency_ns: number;
  driving: { command: string; pid: number } | null;
  state: string;
  position_ns: number | string;
  duration_ns: number | string;
  events_total: number;
  events_emitted: number;
  updated_at: string;
}

const DEFAULT_SERVER = 'http://127.0.0.1:7070';
const UNITS_NS: Record<string, number> = { ns: 1, us: 1e3, ms: 1e6, s: 1e9, m: 60e9 };

/** A position in the recording: 1.5s, 250ms, 300us, or nanoseconds. */
export function positionOption(value: string): bigint {
  const match = /^(\d+(?:\.\d+)?)(ns|us|ms|s|m)?$/.exec(value);
  if (!match)
    throw new InvalidArgumentError(`expected a position like 1.5s, 250ms or 1200000 (ns), got "${value}"`);
  return BigInt(Math.round(Number(match[1]) * UNITS_NS[match[2] ?? 'ns']!));
}

function line(server: string, s: Session): string {
  const links = sessionLinks(server, s.id, s.transaction_id);
  return (
    `session ${s.id}: ${s.state}, transaction ${s.transaction_id}, ` +
    `${formatNs(BigInt(s.position_ns))} of ${formatNs(BigInt(s.duration_ns))}, ` +
    `${s.events_emitted}/${s.events_total} events, speed ${s.speed_factor}` +
    (s.driving ? `, driving \`${s.driving.command}\` (pid ${s.driving.pid})` : '') +
    `\n  API: ${links.api}\n  web: ${links.web}\n`
  );
}

const base = (server: string) => `${server}/api/replay/sessions`;

export function registerSessionCommand(program: Command): Command {
  const session = program
    .command('session')
    .description("the daemon's replay sessions: list, show, play, pause, seek, stop");
  const serverFlag = (command: Command) =>
    command.option('--server <url>', 'daemon base URL', baseUrlOption, DEFAULT_SERVER);

  serverFlag(
    session.command('list').description('every session: id, state, transaction, position, what it drives'),
  ).action(async (flags: { server: string }) => {
    const { sessions } = await requestJson<{ sessions: Session[] }>('GET', base(flags.server));
    const rows = sessions.map((s) => [
      s.id,
      s.state,
      s.transaction_id,
      `${formatNs(BigInt(s.position_ns))} / ${formatNs(BigInt(s.duration_ns))}`,
      s.speed_factor,
      s.driving ? s.driving.command : '-',
    ]);
    process.stdout.write(
      sessions.length === 0
        ? 'no replay sessions\n'
        : `${formatTable(rows, ['SESSION', 'STATE', 'TRANSACTION', 'POSITION', 'SPEED', 'DRIVING'])}\n`,
    );
  });
  serverFlag(
    session.command('show').description('one session, with its API URL and web page link').argument('<id>'),
  ).action(async (id: string, flags: { server: string }) => {
    process.stdout.write(
      line(flags.server, await requestJson<Session>('GET', `${base(flags.server)}/${id}`)),
    );
  });
  for (const [control, what] of [
    ['play', 'play (or resume) a session'],
    ['pause', 'pause a playing session: a build it drives at timeline pace waits'],
    ['stop', 'stop a session for good: a build it drives runs on unheld'],
  ] as const)
    serverFlag(session.command(control).description(what).argument('<id>')).action(
      async (id: string, flags: { server: string }) => {
        const body = await requestJson<Session>('POST', `${base(flags.server)}/${id}/${control}`);
        process.stdout.write(line(flags.server, body));
      },
    );
  serverFlag(
    session
      .command('seek')
      .description('move a session to a position in the recording (it keeps playing or paused)')
      .argument('<id>')
      .argument('<position>', 'in the recording: 1.5s, 250ms, or nanoseconds', positionOption),
  ).action(async (id: string, position: bigint, flags: { server: string }) => {
    const body = await requestJson<Session>('POST', `${base(flags.server)}/${id}/seek`, {
      position_ns: Number(position),
    });
    process.stdout.write(line(flags.server, body));
  });
  return session;
}
