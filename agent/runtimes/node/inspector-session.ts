/**
 * A session with a Node inspector on 127.0.0.1 of its process's network namespace: the Chrome
 * DevTools Protocol over sockets the agent connects itself (inspector-socket.ts), only
 * Runtime.evaluate, each step under a deadline. No domain is enabled, so the only messages that
 * come are the answers.
 */
import { KreplayError } from '../../../core/errors';
import { httpGet, openTextSocket, type Dial, type TextSocket } from './inspector-socket';

export class NodeHookError extends KreplayError {
  constructor(message: string) {
    super('E_NODE_HOOK', message);
  }
}

interface Answer {
  id?: number;
  result?: { result?: { type?: string; value?: unknown; description?: string }; exceptionDetails?: unknown };
  error?: { message?: string };
}

/** `promise`, or a NodeHookError naming `what` after `ms`. */
export function deadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new NodeHookError(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

export class InspectorSession {
  private next = 1;
  private readonly waiting = new Map<number, (answer: Answer) => void>();
  private ended = false;
  /** Resolves when the session ended (the inspector closed it, or close()). */
  readonly closed: Promise<void>;

  private socket: TextSocket | undefined;

  private constructor(private readonly timeoutMs: number) {
    let ended = (): void => undefined;
    this.closed = new Promise((resolve) => (ended = resolve));
    this.onClose = () => {
      this.ended = true;
      ended();
      for (const resolve of this.waiting.values())
        resolve({ error: { message: 'the inspector closed the session' } });
      this.waiting.clear();
    };
  }

  private readonly onClose: () => void;

  private onText(text: string): void {
    let answer: Answer;
    try {
      answer = JSON.parse(text) as Answer;
    } catch {
      return;
    }
    const resolve = answer.id === undefined ? undefined : this.waiting.get(answer.id);
    if (resolve) {
      this.waiting.delete(answer.id!);
      resolve(answer);
    }
  }

  /**
   * Connects to the inspector listening on 127.0.0.1:`port` (its first target), each connection
   * made by `dial` (in the inspector's network namespace).
   */
  static async open(port: number, timeoutMs: number, dial: Dial): Promise<InspectorSession> {
    const list = await deadline(
      httpGet(dial, port, '/json/list').then((body) => JSON.parse(body) as unknown),
      timeoutMs,
      'the inspector target list',
    ).catch((err: unknown) => {
      throw err instanceof NodeHookError
        ? err
        : new NodeHookError(`no inspector target list: ${String(err)}`);
    });
    const url = Array.isArray(list)
      ? (list[0] as { webSocketDebuggerUrl?: unknown })?.webSocketDebuggerUrl
      : null;
    if (typeof url !== 'string' || !url.startsWith(`ws://127.0.0.1:${port}/`))
      throw new NodeHookError(`the inspector on port ${port} names no target`);
    const session = new InspectorSession(timeoutMs);
    const opening = openTextSocket(
      dial,
      port,
      url.slice(`ws://127.0.0.1:${port}`.length),
      (text) => session.onText(text),
      () => session.onClose(),
    );
    session.socket = await deadline(
      opening.catch((err: unknown) => {
        throw new NodeHookError(`the inspector refused the session: ${String(err)}`);
      }),
      timeoutMs,
      'the inspector session',
    ).catch((err: unknown) => {
      // one that opens after the deadline is closed at once
      void opening.then(
        (socket) => socket.close(),
        () => undefined,
      );
      throw err;
    });
    return session;
  }

  /** The value `expression` evaluates to in the process; throws NodeHookError on an exception. */
  async evaluate(expression: string): Promise<unknown> {
    if (this.ended) throw new NodeHookError('the inspector closed the session');
    const id = this.next++;
    const answered = new Promise<Answer>((resolve) => this.waiting.set(id, resolve));
    this.socket!.send(
      JSON.stringify({
        id,
        method: 'Runtime.evaluate',
        // require() without process.getBuiltinModule (Node < 20.16) comes with the command line API
        params: { expression, includeCommandLineAPI: true, returnByValue: true },
      }),
    );
    const answer = await deadline(answered, this.timeoutMs, 'Runtime.evaluate').finally(() =>
      this.waiting.delete(id),
    );
    if (answer.error)
      throw new NodeHookError(`Runtime.evaluate failed: ${answer.error.message ?? 'unknown error'}`);
    const result = answer.result;
    if (result?.exceptionDetails !== undefined)
      throw new NodeHookError(`the evaluated code threw: ${result.result?.description ?? 'an exception'}`);
    return result?.result?.value;
  }

  /**
   * Ends the session from this side. Not while the process closes its inspector: Node 24's
   * inspector thread crashes (a freed handler, WsHandler::OnCloseFrameWritten) when both sides
   * close at once; wait for `closed` then.
   */
  close(): void {
    this.socket?.close();
  }
}
