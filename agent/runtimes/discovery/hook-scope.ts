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

export class HookScope {
  private readonly include: ProcessSelectors | null;
  private readonly exclude: ProcessSelectors;
  /** by network namespace inode: its listening sockets' inodes, and when they were read */
  private readonly tables = new Map<number, { at: number; inodes: Set<number> }>();

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

  /** Whether the process holds a socket listening on TCP in its network namespace. */
  serves(pid: number): boolean {
    const own = socketInodes(pid);
    if (own.size === 0) return false;
    let netns: number;
    try {
      netns = statSync(`/proc/${pid}/ns/net`).ino;
    } catch {
      return false;
    }
    const now = performance.now();
    let table = this.tables.get(netns);
    if (!table || now - table.at > TABLE_MS) {
      table = { at: now, inodes: new Set(namespaceListening(pid).map((s) => s.inode)) };
      // namespaces come and go (containers): the stale ones are dropped
      for (const [ns, t] of this.tables) if (now - t.at > TABLE_MS) this.tables.delete(ns);
      this.tables.set(netns, table);
    }
    for (const inode of own) if (table.inodes.has(inode)) return true;
    return false;
  }
}
