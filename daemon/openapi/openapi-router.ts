/** GET /api/openapi.json: the API description (openapi-document.ts), built once. */
import { Router } from 'express';
import { openApiDocument } from './openapi-document';

export function openApiRouter(): Router {
  const router = Router();
  const text = JSON.stringify(openApiDocument());
  router.get('/api/openapi.json', (_req, res) => {
    res.type('application/json').send(text);
  });
  return router;
}
