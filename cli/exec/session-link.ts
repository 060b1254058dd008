/**
 * The driving side of a replay session: follows its state frames over SSE and
 * turns them into what the supervisor does to the build. Timeline pace: the
 * session's position drives the build's timeline (pause holds every matched
 * call, play releases, seek moves it); either pace: stop lets everything through.
 */
import type { NativeExecSupervisor } from '../../core/native/addon';
import type { Schedule } from '../../core/replay/schedule';
import { openEventStream, type EventStream } from '../sse-client';
import type { Pace } from './exec-plan';

interface StateFrame {
  state: string;
  position_ns: number;
  events_emitted: number;
}

export class SessionLink {
  private stream: EventStream | null = null;
  private closed = false;
  /** our own play's echo must not move the timeline the build started on */
  private ownPlayPending = true;
  state = 'ready';

  constructor(
    private readonly url: string,
    private readonly supervisor: NativeExecSupervisor,
    private readonly schedule: Schedule,
    private readonly pace: Pace,
    private readonly warn: (text: string) => void,
  ) {}

  /** Resolves once connected (the session's first state frame is then on its way). */
  async open(): Promise<void> {
    this.stream = await openEventStream(this.url);
    void this.follow(this.stream);
  }

  close(): void {
    this.closed = true;
    this.stream?.close();
  }

  private async follow(stream: EventStream): Promise<void> {
    try {
      for await (const message of stream.messages) {
        if (message.event === 'state') this.apply(JSON.parse(message.data) as StateFrame);
      }
    } catch {
      // reported below, as the end of the stream
    }
    if (this.closed || this.state === 'stopped') return;
    // without the session the build can't be paced any more: let it run free rather than hang
    this.warn('lost the replay session stream; the build runs on unpaced');
    this.supervisor.bypass();
  }

  private apply(frame: StateFrame): void {
    const was = this.state;
    this.state = frame.state;
    if (frame.state === 'stopped') {
      this.supervisor.bypass();
      return;
    }
    if (this.pace !== 'timeline') return;
    const wallNs = Number(this.schedule.wallOffset(frame.events_emitted, BigInt(frame.position_ns)));
    if (frame.state === 'playing') {
      if (this.ownPlayPending && was !== 'paused') {
        this.ownPlayPending = false;
        return;
      }
      // a resume, or a seek while playing
      this.supervisor.setTimeline(true, wallNs);
    } else if (frame.state === 'paused') {
      this.ownPlayPending = false;
      this.supervisor.setTimeline(false, wallNs);
    }
  }
}
