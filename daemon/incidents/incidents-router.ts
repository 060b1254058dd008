/** GET /api/incidents (the incident files served) and POST /api/incidents (upload one). */
import { Router } from 'express';
import { IncidentFileError } from '../../core/incident';
import { exactJson } from '../../core/json/exact-json';
import { ProblemError } from '../http/problem';
import type { IncidentThread } from './incident-thread';
import { readUpload, UploadGate } from './upload-body';

export function incidentsRouter(
  library: IncidentThread,
  uploads = new UploadGate(),
  /** told when an upload is over, taken or refused: its buffer is memory to give back */
  uploadDone: () => void = () => undefined,
): Router {
  const router = Router();
  router.get('/', async (_req, res) => {
    const { incidents, skipped } = await library.listing();
    res.type('application/json').send(exactJson({ incidents, skipped }));
  });
  router.post('/', async (req, res) => {
    if (!req.is('application/octet-stream'))
      throw new ProblemError(
        'unsupported-media-type',
        'the body is the incident file: send it as application/octet-stream',
      );
    let entry;
    try {
      entry = await library.upload(await readUpload(req, uploads));
    } catch (err) {
      if (err instanceof IncidentFileError)
        throw new ProblemError('invalid-incident', err.message, [{ param: 'body', message: err.message }]);
      throw err;
    } finally {
      uploadDone();
    }
    const { id, transaction_id, events, digest } = entry;
    res.status(201).type('application/json').send(exactJson({ id, transaction_id, events, digest }));
  });
  return router;
}
