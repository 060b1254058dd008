import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express, { Router, type ErrorRequestHandler, type Request } from 'express';
import { requestLog } from '../../daemon/http/request-log';
import { recordingLogger } from '../support/recording-logger';

describe('requestLog', () => {
  it("names each request's route template, an error's too, without a property on the request", async () => {
    const logged: Record<string, unknown>[] = [];
    const seen: Request[] = [];
    const app = express();
    app.use(requestLog(recordingLogger((_level, _msg, fields) => logged.push(fields!))));
    const api = Router();
    api.get('/items/:id', (req, res) => {
      seen.push(req);
      res.json({ id: req.params.id });
    });
    api.get('/broken/', () => {
      throw new Error('broken');
    });
    app.use('/api', api);
    // answered after the router is left: req.baseUrl is reset by then
    const handler: ErrorRequestHandler = (_err, req, res, _next) => {
      seen.push(req);
      res.status(500).end();
    };
    app.use(handler);
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const paths = ['/api/items/1', '/api/items/2', '/api/broken/', '/nowhere'];
      for (const path of paths) await (await fetch(base + path)).arrayBuffer();
    } finally {
      server.close();
    }
    expect(logged.map(({ route, path, status }) => ({ route, path, status }))).toEqual([
      { route: '/api/items/:id', path: '/api/items/1', status: 200 },
      { route: '/api/items/:id', path: '/api/items/2', status: 200 },
      { route: '/api/broken', path: '/api/broken/', status: 500 },
      { route: null, path: '/nowhere', status: 404 },
    ]);
    // the accessor lives on the app's request prototype, defined once: none on each request
    expect(seen).toHaveLength(3);
    for (const req of seen) expect(Object.getOwnPropertyDescriptor(req, 'route')).toBeUndefined();
    expect(seen[0]!.route).toBeDefined();
  });
});
