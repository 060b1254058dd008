/**
 * GET /api/replay/sessions/{id}/events: the session's events as they are
 * emitted. A client resuming with Last-Event-ID: N first gets events N+1 up
 * to the live position again from the store, at its own pace, then the live
 * stream; a new client starts live. Closing a stream never touches the session.
 */
import type { RequestHandler } from 'express';
import { clientName } from '../../auth/client-name';
import { badRequest } from '../../http/problem';
import type { StreamLimits } from '../stream/stream-limits';
import type { ReplaySessions } from './session-service';
import { SseWatcher } from '../stream/sse-watcher';
import { EVENT_ID_DIGITS } from '../../../core/replay/event-id';

const EVENT_ID = new RegExp(`^\\d{1,${EVENT_ID_DIGITS}}$`);

export function sessionEventsHandler(sessions: ReplaySessions, limits: StreamLimits): RequestHandler {
  return async (req, res) => {
    const session = sessions.get(String(req.params.id));
    const lastEventId = req.get('Last-Event-ID')?.trim();
    if (lastEventId !== undefined && !EVENT_ID.test(lastEventId))
      throw badRequest([
        { param: 'Last-Event-ID', message: 'expected the id of a replay event, a non-negative integer' },
      ]);
    // the first event the client does not have yet (0 for a new client, which starts live)
    let from = lastEventId === undefined ? 0 : Number(lastEventId) + 1;
    // the history's first page is read before the stream starts: a store that fails answers a problem
    let history = lastEventId === undefined ? undefined : session.history(from);
    let first = await history?.next();
    const client = clientName(req, res);
    const release = limits.acquire(client);
    const watcher: SseWatcher = new SseWatcher(
      res,
      () => {
        release();
        session.unwatch(watcher);
      },
      () => limits.cut(client),
    );
    // history at the client's pace, until nothing waits in Node's buffers: the clock may take the stream then
    if (history) {
      do {
        for (let step = first ?? (await history.next()); !step.done; step = await history.next()) {
          if (!(await watcher.send(step.value.bytes))) return;
          from += step.value.events;
        }
        first = undefined;
        history = session.history(from);
      } while (!watcher.idle && (await watcher.drained()));
    } else await watcher.drained();
    if (!watcher.open) return;
    // a resuming client has every event before `from`, some perhaps past what this thread has heard of
    sessions.watch(session, watcher, from);
  };
}
