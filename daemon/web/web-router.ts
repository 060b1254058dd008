/**
 * The incident page: index.html at / (revalidated every time, it names the
 * current assets) and its content-hashed assets under /assets/ (cached for a
 * year, immutable). Built by `make` into dist/web; nothing is fetched from
 * anywhere else at run time.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import express, { Router } from 'express';
import { ProblemError } from '../http/problem';

export function webRouter(root: string): Router {
  const router = Router();
  const index = join(root, 'index.html');
  router.get('/', (_req, res) => {
    if (!existsSync(index))
      throw new ProblemError('route-not-found', `the web page is not built (no ${index}): run make build`);
    res.set('Cache-Control', 'no-cache');
    res.sendFile(index);
  });
  router.use(
    '/assets',
    express.static(join(root, 'assets'), {
      index: false,
      fallthrough: true,
      immutable: true,
      maxAge: '365d',
    }),
  );
  return router;
}
