/**
 * Following an event stream across its connections: a stream that drops is
 * resumed with Last-Event-ID. One that brought events before it dropped is
 * resumed at once: the daemon cuts a stream whose client fell too far behind
 * (its send buffer's bound), and each millisecond spent waiting then is one
 * more that every later event of a dense replay reaches the client late.
 * Only connections that bring nothing new wait before the next try, and
 * give up after `attempts` of them in a row. Shared by the CLI's stream
 * and the timeline page's, so it uses no Node types.
 */

/** What one connection did: true once the stream finished; false when it ended before. */
export type FollowOnce = () => Promise<boolean>;

export interface ResumePolicy {
  /** connections in a row that bring nothing new before giving up */
  attempts: number;
  /** the wait before retrying after such a connection */
  waitMs: number;
}

export interface ResumeHooks {
  /** the last event id seen so far (a connection that moved it made progress) */
  lastSeen(): string | undefined;
  /** waits `ms` before the next try (default: a timer; a test passes its own) */
  pause?(ms: number): Promise<void>;
  /** whether an error a connection threw is worth a retry (a network error), not an answer to pass on */
  retriable(err: unknown): boolean;
  /** the error to end with once the tries are spent, given the last network error (or null: the stream kept ending) */
  giveUp(networkError: unknown): Error;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Follows `follow` until the stream finishes, resuming after drops as the policy says. */
export async function followResuming(
  follow: FollowOnce,
  policy: ResumePolicy,
  hooks: ResumeHooks,
): Promise<void> {
  for (let failures = 0; ;) {
    const seenBefore = hooks.lastSeen();
    let networkError: unknown = null;
    try {
      if (await follow()) return;
    } catch (err) {
      if (!hooks.retriable(err)) throw err;
      networkError = err;
    }
    failures = hooks.lastSeen() === seenBefore ? failures + 1 : 0;
    if (failures > policy.attempts) throw hooks.giveUp(networkError);
    if (failures > 0) await (hooks.pause ?? sleep)(policy.waitMs);
  }
}
