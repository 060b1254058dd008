/**
 * A session with a Node inspector on 127.0.0.1: the Chrome DevTools Protocol over Node 24's
 * global WebSocket, only Runtime.evaluate, each step under a deadline. No domain is enabled, so
 * the only messages that come are the answers.
 */
import { KreplayError } from '../../../core/errors';

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

  private constructor(
    private readonly socket: WebSocket,
    private readonly timeoutMs: number,
  ) {
    socket.addEventListener('message', (event) => {
      let answer: Answer;
      try {
        answer = JSON.parse(String(event.data)) as Answer;
      } catch {
        return;
      }
      const resolve = answer.id === undefined ? undefined : this.waiting.get(answer.id);
      if (resolve) {
        this.waiting.delete(answer.id!);
        resolve(answer);
      }
    });
    let ended = (): void => undefined;
    this.closed = new Promise((resolve) => (ended = resolve));
    socket.addEventListener('close', () => {
      this.ended = true;
      ended();
      for (const resolve of this.waiting.values())
        resolve({ error: { message: 'the inspector closed the session' } });
      this.waiting.clear();
    });
  }

  /** Connects to the inspector listening on 127.0.0.1:`port` (its first target). */
  static async open(port: number, timeoutMs: number): Promise<InspectorSession> {
    const list = await deadline(
      fetch(`http://127.0.0.1:${port}/json/list`).then((r) => r.json() as Promise<unknown>),
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
    const socket = new WebSocket(url);
    await deadline(
      new Promise<void>((resolve, reject) => {
        socket.addEventListener('open', () => resolve());
        socket.addEventListener('error', () =>
          reject(new NodeHookError('the inspector refused the session')),
        );
      }),
      timeoutMs,
      'the inspector session',
    ).catch((err: unknown) => {
      socket.close();
      throw err;
    });
    return new InspectorSession(socket, timeoutMs);
  }

  /** The value `expression` evaluates to in the process; throws NodeHookError on an exception. */
  async evaluate(expression: string): Promise<unknown> {
    if (this.ended) throw new NodeHookError('the inspector closed the session');
    const id = this.next++;
    const answered = new Promise<Answer>((resolve) => this.waiting.set(id, resolve));
    this.socket.send(
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
    this.socket.close();
  }
}
