/** GET /api/incidents (the incident files served) and POST /api/incidents (upload one). */
import express, { Router } from 'express';
import { IncidentFileError } from '../../core/incident';
import { exactJson } from '../../core/json/exact-json';
import { ProblemError } from '../http/problem';
import type { IncidentThread } from './incident-thread';

/** An upload larger than this is refused (413): ~40x the 1M-event file of bench/incident.ts. */
export const MAX_INCIDENT_UPLOAD = '256mb';

export function incidentsRouter(library: IncidentThread): Router {
  const router = Router();
  router.get('/', async (_req, res) => {
    const { incidents, skipped } = await library.listing();
    res.type('application/json').send(exactJson({ incidents, skipped }));
  });
  router.post(
    '/',
    express.raw({ type: 'application/octet-stream', limit: MAX_INCIDENT_UPLOAD }),
    async (req, res) => {
      if (!req.is('application/octet-stream'))
        throw new ProblemError(
          'unsupported-media-type',
          'the body is the incident file: send it as application/octet-stream',
        );
      let entry;
      try {
        entry = await library.upload(req.body as Buffer);
      } catch (err) {
        if (err instanceof IncidentFileError)
          throw new ProblemError('invalid-incident', err.message, [{ param: 'body', message: err.message }]);
        throw err;
      }
      const { id, transaction_id, events, digest } = entry;
      res.status(201).type('application/json').send(exactJson({ id, transaction_id, events, digest }));
    },
  );
  return router;
}
