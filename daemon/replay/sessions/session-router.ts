/** /api/replay/sessions: create, list, read, control and delete replay sessions. */
import express, { Router, type Response } from 'express';
import { clientName } from '../../auth/client-name';
import { sessionEventsHandler } from './session-events-handler';
import type { ReplaySession } from './replay-session';
import { createSessionSchema, emptySchema, parseBody, seekSchema } from './session-schema';
import type { ReplaySessions } from './session-service';
import { CONTROLS } from './session-state';
import type { StreamLimits } from '../stream/stream-limits';

function sendSession(res: Response, status: number, session: ReplaySession): void {
  res.status(status).type('application/json').send(session.json());
}

export function replaySessionsRouter(sessions: ReplaySessions, limits: StreamLimits): Router {
  const router = Router();
  router.use(express.json({ limit: '16kb' }));
  router.post('/', async (req, res) => {
    const session = await sessions.create(parseBody(createSessionSchema, req), clientName(req, res));
    res.location(`${req.baseUrl}/${encodeURIComponent(session.id)}`);
    sendSession(res, 201, session);
  });
  router.get('/', (_req, res) => {
    const list = sessions.list().map((session) => session.json());
    res.type('application/json').send(`{"sessions":[${list.join(',')}]}`);
  });
  router.get('/:id', (req, res) => sendSession(res, 200, sessions.get(req.params.id)));
  router.delete('/:id', (req, res) => {
    sessions.remove(req.params.id);
    res.status(204).end();
  });
  router.get('/:id/events', sessionEventsHandler(sessions, limits));
  router.post('/:id/:control', async (req, res, next) => {
    const control = CONTROLS.find((c) => c === req.params.control);
    if (!control) return next();
    const session = sessions.get(req.params.id);
    if (control === 'seek') await session.seek(BigInt(parseBody(seekSchema, req).position_ns));
    else {
      parseBody(emptySchema, req);
      await session[control]();
    }
    sendSession(res, 200, session);
  });
  return router;
}
