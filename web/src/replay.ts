/**
 * A replay session as the page follows it: the session's SSE stream drives
 * the playhead (state frames carry position_ns, each replay frame the event
 * just emitted and its lateness), so every tab watching the same session
 * shows the same thing. Between frames a playing playhead moves at the
 * session's speed, never past the next event still to come.
 */
import { control, createSession, getSession, type Session } from './api';
import { followSse } from './sse';

export interface ReplayListener {
  state(session: Session): void;
  emitted(index: number, eventId: string, lateNs: number | null, offsetNs: number): void;
  /** the stream was refused (a session gone, a token missing) */
  failed(message: string): void;
}

export class ReplayFollower {
  session: Session | null = null;
  private stream: { close(): void } | null = null;
  private basePosition = 0;
  private baseWall = 0;

  constructor(private readonly listener: ReplayListener) {}

  static async create(
    transactionId: string,
    speed: number,
    extraLatencyNs: number,
    listener: ReplayListener,
  ) {
    const follower = new ReplayFollower(listener);
    follower.follow(await createSession(transactionId, speed, extraLatencyNs));
    return follower;
  }

  static async join(id: string, listener: ReplayListener) {
    const follower = new ReplayFollower(listener);
    follower.follow(await getSession(id));
    return follower;
  }

  private follow(session: Session): void {
    this.onState(session);
    this.stream = followSse(
      `/api/replay/sessions/${encodeURIComponent(session.id)}/events`,
      (m) => {
        if (m.event === 'state') this.onState(JSON.parse(m.data) as Session);
        else if (m.event === 'replay') {
          const data = JSON.parse(m.data) as {
            event_id: string;
            replay_offset_ns: number;
            emitted_late_ns: number | null;
          };
          this.listener.emitted(Number(m.lastId), data.event_id, data.emitted_late_ns, data.replay_offset_ns);
        }
      },
      (message) => this.listener.failed(message),
    );
  }

  private onState(session: Session): void {
    this.session = session;
    this.basePosition = session.position_ns;
    this.baseWall = performance.now();
    if (session.state === 'stopped') this.close();
    this.listener.state(session);
  }

  /** Where the replay stands now (ns from the first event), no further than `cap`. */
  position(cap: number): number {
    const s = this.session;
    if (!s) return 0;
    if (s.state !== 'playing') return this.basePosition;
    const moved = (performance.now() - this.baseWall) * 1e6 * s.speed_factor;
    return Math.max(this.basePosition, Math.min(this.basePosition + moved, cap, s.duration_ns));
  }

  /** An emitted event moves the playhead to it. */
  reached(offsetNs: number): void {
    if (offsetNs >= this.basePosition) {
      this.basePosition = offsetNs;
      this.baseWall = performance.now();
    }
  }

  act(action: 'play' | 'pause' | 'stop'): Promise<Session> {
    return control(this.session!.id, action);
  }

  seek(positionNs: number): Promise<Session> {
    return control(this.session!.id, 'seek', { position_ns: positionNs });
  }

  close(): void {
    this.stream?.close();
    this.stream = null;
  }
}
