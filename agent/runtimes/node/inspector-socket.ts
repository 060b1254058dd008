/**
 * HTTP and a WebSocket client over a socket the agent connected itself (InspectorGuard.connectIn:
 * in the hooked process's network namespace, a container's as well as the agent's), since Node's
 * global fetch and WebSocket dial their own. Only what the inspector needs: one GET, then text
 * frames (RFC 6455: the client's masked, the server's not; pings answered).
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import type { Socket } from 'node:net';

/** Makes the socket a request goes over (a new one each time). */
export type Dial = () => Socket;

/** The body of GET `path` from the inspector at 127.0.0.1:`port`, over `dial()`. */
export function httpGet(dial: Dial, port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        createConnection: dial,
        headers: { connection: 'close' },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () =>
          res.statusCode === 200 ? resolve(body) : reject(new Error(`HTTP ${res.statusCode} for ${path}`)),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const TEXT = 0x1;
const CLOSE = 0x8;
const PING = 0x9;
const PONG = 0xa;

/** One frame of the client's: FIN, `opcode`, masked `payload`. */
export function clientFrame(opcode: number, payload: Buffer): Buffer {
  const n = payload.length;
  const head = n < 126 ? Buffer.alloc(2) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  head[0] = 0x80 | opcode;
  if (n < 126) head[1] = 0x80 | n;
  else if (n < 65536) {
    head[1] = 0x80 | 126;
    head.writeUInt16BE(n, 2);
  } else {
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  const mask = randomBytes(4);
  const body = Buffer.from(payload);
  for (let i = 0; i < n; i++) body[i]! ^= mask[i % 4]!;
  return Buffer.concat([head, mask, body]);
}

/** The complete frames at the start of `buf` (the server's, unmasked) and what is left after them. */
export function serverFrames(buf: Buffer): {
  frames: { fin: boolean; opcode: number; payload: Buffer }[];
  rest: Buffer;
} {
  const frames: { fin: boolean; opcode: number; payload: Buffer }[] = [];
  let at = 0;
  for (;;) {
    if (buf.length - at < 2) break;
    const b0 = buf[at]!;
    const b1 = buf[at + 1]!;
    let len = b1 & 0x7f;
    let head = 2;
    if (len === 126) {
      if (buf.length - at < 4) break;
      len = buf.readUInt16BE(at + 2);
      head = 4;
    } else if (len === 127) {
      if (buf.length - at < 10) break;
      len = Number(buf.readBigUInt64BE(at + 2));
      head = 10;
    }
    const maskLen = b1 & 0x80 ? 4 : 0;
    if (buf.length - at < head + maskLen + len) break;
    const payload = Buffer.from(buf.subarray(at + head + maskLen, at + head + maskLen + len));
    if (maskLen) for (let i = 0; i < len; i++) payload[i]! ^= buf[at + head + (i % 4)]!;
    frames.push({ fin: (b0 & 0x80) !== 0, opcode: b0 & 0x0f, payload });
    at += head + maskLen + len;
  }
  return { frames, rest: buf.subarray(at) };
}

export interface TextSocket {
  send(text: string): void;
  /** sends a close frame and ends the socket */
  close(): void;
}

/**
 * Opens the WebSocket at `path` of the inspector at 127.0.0.1:`port` over `dial()`; `onText` gets
 * each message, `onClose` once when the connection ends (either side).
 */
export function openTextSocket(
  dial: Dial,
  port: number,
  path: string,
  onText: (text: string) => void,
  onClose: () => void,
): Promise<TextSocket> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      path,
      createConnection: dial,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': randomBytes(16).toString('base64'),
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      res.resume();
      reject(new Error(`the inspector answered HTTP ${res.statusCode}, not a WebSocket`));
    });
    req.on('upgrade', (_res, socket: Socket, head: Buffer) => {
      let buffered = head;
      let message: Buffer[] = [];
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        socket.destroy();
        onClose();
      };
      socket.on('data', (chunk: Buffer) => {
        const { frames, rest } = serverFrames(Buffer.concat([buffered, chunk]));
        buffered = rest;
        for (const f of frames) {
          if (f.opcode === CLOSE) return end();
          if (f.opcode === PING) socket.write(clientFrame(PONG, f.payload));
          else if (f.opcode === TEXT || f.opcode === 0) {
            message.push(f.payload);
            if (f.fin) {
              const text = Buffer.concat(message).toString('utf8');
              message = [];
              onText(text);
            }
          }
        }
      });
      socket.on('close', end);
      socket.on('error', end);
      resolve({
        send: (text) => {
          if (!ended) socket.write(clientFrame(TEXT, Buffer.from(text, 'utf8')));
        },
        close: () => {
          if (!ended) socket.end(clientFrame(CLOSE, Buffer.alloc(0)));
        },
      });
    });
    req.end();
  });
}
