/**
 * Which processes the runtime hooks go into (docs/operate.md "Runtime processes"): those the
 * capture filters include, that no --hook-exclude names, and that a --hook-include names; without
 * any --hook-include, those that serve: a listening TCP socket among their own descriptors, in
 * their own network namespace (/proc/PID/net/tcp{,6} is the namespace's), or a parent that has one
 * (a pre-fork server's workers, a cluster's). A host's tools, shells and daemons that serve nothing
 * are left alone.
 */
import { statSync } from 'node:fs';
import { ProcessSelectors, type SelectedProcess } from '../../filter/process-selectors';
import { formatSelector, type Selector } from '../../filter/selector';
import { namespaceListening, socketInodes } from '../node/listening-sockets';
import { parseStat, readStat } from '../process-tree';

export interface HookScopeOptions {
  /** undefined: the default scope (servers and their children) */
  include?: Selector[];
  exclude: Selector[];
  /** whether the capture filters include the process */
  captured(pid: number): boolean;
  /** the process as the selectors read it; null when gone */
  read(pid: number): SelectedProcess | null;
}

export const NOT_SERVING =
  'it serves nothing (no listening TCP socket of its own nor of its parent): the default scope hooks servers and their children; --hook-include widens it';

/** How long one read of a network namespace's listening sockets answers for it (a scan's length). */
const TABLE_MS = 250;
/** A namespace's table not read for this long is dropped (namespaces come and go: containers). */
const TABLE_FORGET_MS = 60_000;

interface ListeningTable {
  at: number;
  inodes: Set<number>;
  /** bumped when a socket starts listening: only that can make a process that served nothing serve */
  added: number;
}

/** A process found serving nothing: its start time (a later process with its pid is another), and its namespace's table then. */
interface NotServing {
  startTime: string;
  netns: number;
  added: number;
}

export class HookScope {
  private readonly include: ProcessSelectors | null;
  private readonly exclude: ProcessSelectors;
  /** by network namespace inode: its listening sockets' inodes, and when they were read */
  private readonly tables = new Map<number, ListeningTable>();
  /** by pid: the processes found serving nothing, whose descriptors are read again only once a socket started listening */
  private readonly notServing = new Map<number, NotServing>();

  constructor(private readonly options: HookScopeOptions) {
    this.include = options.include ? new ProcessSelectors(options.include) : null;
    this.exclude = new ProcessSelectors(options.exclude);
  }

  /** Why the hooks leave process `pid` out now, or null when it is in. */
  check(pid: number): string | null {
    if (!this.options.captured(pid)) return 'the capture filters leave it out';
    if (!this.exclude.empty || this.include) {
      const process = this.options.read(pid);
      if (!process) return 'it is gone';
      const excluded = this.exclude.naming(process);
      if (excluded) return `--hook-exclude ${formatSelector(excluded)} names it`;
      if (this.include) return this.include.naming(process) ? null : 'no --hook-include names it';
    }
    if (this.serves(pid)) return null;
    const parent = parseStat(readStat(pid) ?? '')?.ppid ?? 0;
    return parent > 1 && this.serves(parent) ? null : NOT_SERVING;
  }

  /**
   * Whether the process holds a socket listening on TCP in its network namespace. One found serving
   * nothing is asked again (its descriptors read, a readlink each) only once a socket has started
   * listening in its namespace: a listener of its own would be one. A listener handed to it over a
   * Unix socket while none starts listening is seen at the next that does.
   */
  serves(pid: number): boolean {
    let netns: number;
    try {
      netns = statSync(`/proc/${pid}/ns/net`).ino;
    } catch {
      return false;
    }
    const table = this.table(pid, netns);
    const startTime = parseStat(readStat(pid) ?? '')?.startTime;
    if (startTime === undefined) return false;
    const known = this.notServing.get(pid);
    if (known?.startTime === startTime && known.netns === netns && known.added === table.added) return false;
    for (const inode of socketInodes(pid))
      if (table.inodes.has(inode)) {
        this.notServing.delete(pid);
        return true;
      }
    this.notServing.set(pid, { startTime, netns, added: table.added });
    return false;
  }

  /** The namespace's listening sockets, read at most once per TABLE_MS. */
  private table(pid: number, netns: number): ListeningTable {
    const now = performance.now();
    const last = this.tables.get(netns);
    if (last && now - last.at <= TABLE_MS) return last;
    const inodes = new Set(namespaceListening(pid).map((s) => s.inode));
    const grew = !last || [...inodes].some((inode) => !last.inodes.has(inode));
    const table = { at: now, inodes, added: (last?.added ?? 0) + (grew ? 1 : 0) };
    if (grew)
      // what was found serving nothing in this namespace is asked again: forgotten (this bounds the map)
      for (const [p, n] of this.notServing) if (n.netns === netns) this.notServing.delete(p);
    // a namespace read again after this is new to it (grew): its processes are asked again
    for (const [ns, t] of this.tables) if (now - t.at > TABLE_FORGET_MS) this.tables.delete(ns);
    this.tables.set(netns, table);
    return table;
  }
}
