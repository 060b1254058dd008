/**
 * An OTLP/HTTP trace receiver for tests: it decodes each request it accepts
 * with the OpenTelemetry project's generated code (test/support/otlp-decode.ts)
 * and can be told to misbehave per request: answer an error status (with
 * Retry-After), drop the connection halfway through the body, or not answer.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { decodeTraceJson, decodeTraceRequest, type DecodedSpan } from './otlp-decode';

export type Answer =
  | { kind: 'accept' }
  | { kind: 'status'; status: number; headers?: Record<string, string>; body?: string }
  /** destroys the connection once part of the body came in */
  | { kind: 'drop' }
  /** reads the body and never answers */
  | { kind: 'hang' };

export interface ReceivedRequest {
  path: string;
  headers: IncomingMessage['headers'];
  answer: Answer['kind'];
  spans: number;
}

export class OtlpReceiver {
  readonly spans: DecodedSpan[] = [];
  readonly requests: ReceivedRequest[] = [];
  /** decides each request's answer; accepts all by default */
  answer: (index: number) => Answer = () => ({ kind: 'accept' });
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;
  port = 0;

  private constructor() {
    this.server = createServer((req, res) => this.handle(req, res));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  /** Listens on 127.0.0.1 (a fixed port to come back on after a close, else any). */
  static async start(port = 0): Promise<OtlpReceiver> {
    const receiver = new OtlpReceiver();
    await new Promise<void>((resolve, reject) => {
      receiver.server.once('error', reject);
      receiver.server.listen(port, '127.0.0.1', () => resolve());
    });
    receiver.port = (receiver.server.address() as AddressInfo).port;
    return receiver;
  }

  /** The base endpoint an exporter is given (it appends /v1/traces). */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const answer = this.answer(this.requests.length);
    const record: ReceivedRequest = {
      path: req.url ?? '',
      headers: req.headers,
      answer: answer.kind,
      spans: 0,
    };
    this.requests.push(record);
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      bytes += chunk.length;
      if (answer.kind === 'drop' && bytes > 0) req.socket.destroy();
    });
    req.on('end', () => {
      if (answer.kind === 'hang' || answer.kind === 'drop') return;
      if (answer.kind === 'status') {
        res.writeHead(answer.status, answer.headers).end(answer.body ?? '');
        return;
      }
      const sent = Buffer.concat(chunks);
      const body = req.headers['content-encoding'] === 'gzip' ? gunzipSync(sent) : sent;
      const spans = req.headers['content-type']?.includes('json')
        ? decodeTraceJson(body.toString('utf8'))
        : decodeTraceRequest(body);
      record.spans = spans.length;
      this.spans.push(...spans);
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
