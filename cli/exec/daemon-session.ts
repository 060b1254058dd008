/** The daemon side of a `replay --exec`: the session the build is marked with and that paces it. */
import { requestJson } from '../daemon-request';
import { sessionLinks } from '../session-links';
import type { ExecFlags } from './exec-flags';
import type { IncidentSource } from './incident-source';
import { uploadIncident } from './incident-upload';
import { commandLine } from './launcher';
import { say } from './say';

interface SessionBody {
  id: string;
  state: string;
}

export class DaemonSession {
  private constructor(
    private readonly base: string,
    readonly id: string,
  ) {}

  static async create(
    server: string,
    source: IncidentSource,
    flags: ExecFlags,
    argv: readonly string[],
    pid: number,
  ): Promise<DaemonSession> {
    // a file is served by the daemon once uploaded; its transaction is then replayable by id
    const transactionId = source.file
      ? (await uploadIncident(server, source.file)).transaction_id
      : source.transactionId;
    const base = `${server}/api/replay/sessions`;
    const session = await requestJson<SessionBody>('POST', base, {
      transaction_id: transactionId,
      speed_factor: flags.speed,
      extra_latency_ns: flags.extraLatencyNs,
      driving: { command: commandLine(argv), pid },
    });
    const links = sessionLinks(server, session.id, transactionId);
    say(`session ${session.id} (kreplay session pause|play|seek|stop ${session.id})`);
    say(`  API: ${links.api}`);
    say(`  web: ${links.web}`);
    return new DaemonSession(base, session.id);
  }

  get eventsUrl(): string {
    return `${this.base}/${this.id}/events`;
  }

  control(what: 'play' | 'stop'): Promise<unknown> {
    return requestJson('POST', `${this.base}/${this.id}/${what}`);
  }

  /** Stops the session unless it already ended. */
  async end(): Promise<void> {
    const current = await requestJson<SessionBody>('GET', `${this.base}/${this.id}`).catch(() => null);
    if (current && ['ready', 'playing', 'paused'].includes(current.state))
      await this.control('stop').catch(() => undefined);
  }
}
