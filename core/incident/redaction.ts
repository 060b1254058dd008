/**
 * `--redact paths,peers,services`: values replaced by tokens numbered in
 * order of first appearance, so the same value gets the same token across
 * the file and matching still works.
 *
 * Paths are redacted a component at a time (`/var/lib/app/wal.log` ->
 * `/p1/p2/p3/p4`), so a redacted directory is a prefix of what lies under it
 * and one `--map /p1/p2/p3=/tmp/app` covers every file of it. Socket peers
 * keep their protocol and port and lose their host (`tcp 10.0.0.5:5432` ->
 * `tcp h1:5432`, mapped by host with `--map h1=127.0.0.1`); a unix socket's
 * path is redacted as a path. Services become `s1`, `s2`, ...
 * Device, pipe and anonymous-inode targets (`/dev/null`, `pipe`,
 * `anon_inode:[eventfd]`) name nothing private and stay.
 */
import type { RedactKind } from './incident-types';
import type { EventObject } from './event-columns';

class Tokens {
  private readonly tokens = new Map<string, string>();
  constructor(private readonly prefix: string) {}
  of(value: string): string {
    let token = this.tokens.get(value);
    if (token === undefined) {
      token = `${this.prefix}${this.tokens.size + 1}`;
      this.tokens.set(value, token);
    }
    return token;
  }
}

/* as core/model/target.ts writes them: a truncated path starts with "...", an unlinked one ends with " (deleted)" */
const TRUNCATED = '...';
const DELETED = ' (deleted)';

export class Redactor {
  private readonly components = new Tokens('p');
  private readonly hosts = new Tokens('h');
  private readonly services = new Tokens('s');
  private readonly kinds: ReadonlySet<RedactKind>;

  constructor(kinds: readonly RedactKind[]) {
    this.kinds = new Set(kinds);
  }

  get active(): boolean {
    return this.kinds.size > 0;
  }

  /** `path` with each component replaced by its token, its "..." and " (deleted)" kept. */
  path(path: string): string {
    let body = path;
    const head = body.startsWith(TRUNCATED) ? TRUNCATED : '';
    body = body.slice(head.length);
    const tail = body.endsWith(DELETED) ? DELETED : '';
    body = body.slice(0, body.length - tail.length);
    const redacted = body
      .split('/')
      .map((name) => (name === '' ? '' : this.components.of(name)))
      .join('/');
    return head + redacted + tail;
  }

  /** A socket target's peer: `PROTO HOST:PORT`, `PROTO [V6]:PORT`, `unix PATH` or `unix @NAME`. */
  peer(target: string): string {
    const space = target.indexOf(' ');
    if (space === -1) return target; // not connected: no peer
    const proto = target.slice(0, space);
    if (proto === 'unix') {
      const path = target.slice(space + 1);
      return `unix ${path.startsWith('@') ? `@${this.hosts.of(path)}` : this.path(path)}`;
    }
    // `tcp accepted HOST:PORT` keeps its word: the address follows the last space
    const at = target.lastIndexOf(' ');
    const head = target.slice(0, at);
    const rest = target.slice(at + 1);
    const colon = rest.lastIndexOf(':');
    if (colon === -1) return `${head} ${this.hosts.of(rest)}`;
    return `${head} ${this.hosts.of(rest.slice(0, colon))}${rest.slice(colon)}`;
  }

  /** The event with what is redacted replaced; the event itself is left alone. */
  event(event: EventObject): EventObject {
    if (!this.active) return event;
    const out = { ...event };
    if (this.kinds.has('services') && typeof out.service_name === 'string')
      out.service_name = this.services.of(out.service_name);
    // a container names its service (its name, pod, labels): redacted services leave it out whole
    if (this.kinds.has('services') && out.container !== undefined) delete out.container;
    if (typeof out.target === 'string') {
      if (out.target_kind === 'file' && this.kinds.has('paths')) out.target = this.path(out.target);
      if (out.target_kind === 'socket' && this.kinds.has('peers')) out.target = this.peer(out.target);
    }
    return out;
  }
}
