/**
 * Which runtime a process runs, from what /proc shows of it: Node (its executable or libnode.so
 * exports N-API), CPython (an executable named python3.X, or a mapped libpython3.X: also a uwsgi or
 * mod_wsgi that embeds it), the JVM (a mapped libjvm.so) or Go (its executable has Go's sections).
 * The files' answers are kept by device and inode: each file is read once.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import type { NativeAddon } from '../../../core/native/addon';
import { isGoFile } from '../go/go-binary';
import { NodeRuntimes } from '../node/node-runtime';
import { pythonVersion } from '../python/python-process';
import type { Classification } from './runtime-hook';

const LIBJVM = /\/libjvm\.so(\s|$)/m;

/** What the executable's name and the mapped files tell (CPython, the JVM); null: neither. */
export function classifyMapped(exe: string, maps: string): Classification | null {
  const version = pythonVersion(exe, maps);
  if (version) return { runtime: 'python', version };
  if (LIBJVM.test(maps)) return { runtime: 'jvm' };
  return null;
}

export class RuntimeClassifier {
  private readonly node: NodeRuntimes;
  /** by the executable's device and inode: whether it is a Go program */
  private readonly goFiles = new Map<string, boolean>();

  constructor(addon: Pick<NativeAddon, 'elfSymbols'>) {
    this.node = new NodeRuntimes(addon);
  }

  /** What process `pid` runs (its executable known by `exeId`), or null: none of these, or gone. */
  classify(pid: number, exeId: string): Classification | null {
    let exe: string;
    let maps: string;
    try {
      exe = readlinkSync(`/proc/${pid}/exe`);
      // read once for every runtime: a young process is classified at each of its first scans
      maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
    } catch {
      return null;
    }
    const node = this.node.of(pid, maps);
    if (node) return { runtime: 'node', node };
    const mapped = classifyMapped(exe, maps);
    if (mapped) return mapped;
    let go = this.goFiles.get(exeId);
    if (go === undefined) {
      go = isGoFile(`/proc/${pid}/exe`);
      this.goFiles.set(exeId, go);
    }
    return go ? { runtime: 'go' } : null;
  }
}
