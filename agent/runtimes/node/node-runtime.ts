/**
 * Whether a process runs Node, and where libuv keeps its signal handlers in it: Node links libuv
 * in (the pinned and NodeSource builds) or ships it in libnode.so (Debian's), and exports N-API
 * for addons, which tells it from other programs. The ELF files are read once each.
 */
import { statSync } from 'node:fs';
import type { NativeAddon } from '../../../core/native/addon';
import { mappedFiles } from './node-process';

/** What Node exports for addons: in the executable, or in libnode.so. */
const NODE_SYMBOL = 'napi_module_register';
/** libuv's red-black tree of active signal handles (process.on('SIGUSR1') adds one). */
const SIGNAL_TREE = 'uv__signal_tree';
const LIBNODE = /\/libnode\.so[^/]*$/;
/** The same in a whole maps text: most processes map no libnode, and parsing their maps costs. */
const LIBNODE_MAPPED = /\/libnode\.so[^/\n]*$/m;

interface NodeFile {
  relocatable: boolean;
  /** uv__signal_tree's value in the file; null when its local symbols are stripped */
  signalTree: bigint | null;
}

export interface NodeRuntime {
  /** the signal tree's address in the process; null when it cannot be known */
  signalTree: bigint | null;
}

export class NodeRuntimes {
  /** by the file's device and inode: null for a file that is no Node */
  private readonly files = new Map<string, NodeFile | null>();

  constructor(private readonly addon: Pick<NativeAddon, 'elfSymbols'>) {}

  /**
   * The Node a process runs, or null when it runs none (or is gone). `maps`: its /proc/PID/maps, read
   * once by a caller that reads it for other runtimes too.
   */
  of(pid: number, maps: string): NodeRuntime | null {
    try {
      return this.read(pid, maps);
    } catch {
      // gone while we looked
      return null;
    }
  }

  private read(pid: number, maps: string): NodeRuntime | null {
    const exe = this.file(`/proc/${pid}/exe`);
    if (exe) return { signalTree: exe.relocatable ? this.relocated(pid, null, exe, maps) : exe.signalTree };
    if (!LIBNODE_MAPPED.test(maps)) return null;
    for (const [path] of mappedFiles(maps)) {
      if (!LIBNODE.test(path)) continue;
      const lib = this.file(`/proc/${pid}/root${path}`);
      if (lib) return { signalTree: this.relocated(pid, path, lib, maps) };
    }
    return null;
  }

  /** A relocatable file's symbol at its load address: where its first page is mapped (in `maps`). */
  private relocated(pid: number, path: string | null, file: NodeFile, maps: string): bigint | null {
    if (file.signalTree === null) return null;
    const starts = mappedFiles(maps);
    let base: bigint | undefined;
    if (path !== null) base = starts.get(path);
    else {
      const exe = statSync(`/proc/${pid}/exe`);
      for (const [mapped, start] of starts) {
        try {
          const st = statSync(`/proc/${pid}/root${mapped}`);
          if (st.dev === exe.dev && st.ino === exe.ino) base = start;
        } catch {
          // a mapped file removed since
        }
      }
    }
    return base === undefined ? null : base + file.signalTree;
  }

  private file(path: string): NodeFile | null {
    let key: string;
    try {
      const st = statSync(path);
      key = `${st.dev}:${st.ino}`;
    } catch {
      return null;
    }
    if (!this.files.has(key)) {
      // the exported symbols first: most programs are no Node, and their .symtab may be large
      const node = this.addon.elfSymbols(path, [NODE_SYMBOL], true)?.values[NODE_SYMBOL] !== undefined;
      const elf = node ? this.addon.elfSymbols(path, [SIGNAL_TREE]) : null;
      this.files.set(
        key,
        elf && { relocatable: elf.relocatable, signalTree: elf.values[SIGNAL_TREE] ?? null },
      );
    }
    return this.files.get(key)!;
  }
}
