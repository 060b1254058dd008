/**
 * The `<node>.db` files of the data dir, which may appear (copied or
 * mounted) while the daemon runs. The directory is rescanned when its mtime
 * changes, and at most once a second anyway (a file still being copied is
 * retried once its size or mtime changes).
 *
 * Also the read-only stores the daemon builds from incident files
 * (daemon/incidents, in INCIDENT_STORES_DIR). A live store with the same
 * store id holds the same events under the same ids: it is served and the
 * incident's store is not (shadowed, which is no fault of either).
 */
import { readdirSync, statSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../../core/log/logger';
import type { StoreError } from '../../core/store/schema';
import { NodeStore } from './node-store';

/** A scan at least this often (performance.now()'s: on the wall clock, one stepped back stopped them for the step) */
const RESCAN_MS = 1000;

/** Where the stores built from incident files live, under the data dir. */
export const INCIDENT_STORES_DIR = join('.replay', 'incident-stores');

const isIncidentStore = (name: string) => name.startsWith(`${INCIDENT_STORES_DIR}/`);

/** Which stores a directory serves: the node files and the incidents' (`all`), or the incidents' alone (beside a fleet store). */
export type StoreScope = 'all' | 'incidents';

interface OpenFile {
  store: NodeStore;
  ino: number;
}

const signature = (stat: Stats) => `${stat.ino}:${stat.size}:${stat.mtimeMs}`;

/** The file's signature, or '' when it is gone (never equal to a file's: it is looked at again). */
function signatureOf(path: string): string {
  try {
    return signature(statSync(path));
  } catch {
    return '';
  }
}

/** A file of the data dir that is not served, and why. */
export interface SkippedStore {
  file: string;
  reason: string;
}

/** What readiness reports of the data dir. */
export interface DirectoryHealth {
  /** null when the data dir can be listed */
  dirError: string | null;
  stores: NodeStore[];
  skipped: SkippedStore[];
}

export class StoreDirectory {
  private readonly open = new Map<string, OpenFile>();
  /** files that failed to open or to read, by name, with the stat signature they failed at and why */
  private readonly failed = new Map<string, { signature: string; reason: string }>();
  /** incident stores not served because a live store has their store id, with the signature they had */
  private readonly shadowed = new Map<string, string>();
  private list: NodeStore[] = [];
  private dirMtime = -1;
  private scannedAt = -Infinity;
  private dirError: string | null = null;
  /** where the incident stores appear: looked at by every read */
  private readonly incidentDir: string;

  constructor(
    private readonly dir: string,
    private readonly log: Logger,
    private readonly scope: StoreScope = 'all',
  ) {
    this.incidentDir = join(dir, INCIDENT_STORES_DIR);
  }

  /** The stores open now, by file name; one a read found damaged is skipped from then on. */
  stores(): NodeStore[] {
    this.refresh();
    if (this.list.some((store) => store.damage)) this.skipDamaged();
    return this.list;
  }

  /** A store another reader (a query worker) found damaged: skipped here too. */
  markDamaged(damage: StoreError): void {
    for (const { store } of this.open.values()) if (store.path === damage.file) store.damage = damage;
  }

  health(): DirectoryHealth {
    const stores = this.stores();
    const skipped = [...this.failed].map(([name, { reason }]) => ({ file: join(this.dir, name), reason }));
    return { dirError: this.dirError, stores, skipped };
  }

  private skipDamaged(): void {
    for (const [name, file] of this.open) {
      if (!file.store.damage) continue;
      let stat: Stats | null = null;
      try {
        stat = statSync(file.store.path);
      } catch {
        // gone: the next scan forgets it
      }
      this.drop(name, file, 'damaged');
      this.log.warn('skipping store: damaged', { file: file.store.path, error: file.store.damage.message });
      if (stat) this.failed.set(name, { signature: signature(stat), reason: file.store.damage.message });
    }
    this.list = [...this.open.keys()].sort().map((name) => this.open.get(name)!.store);
  }

  private refresh(): void {
    let mtime = -1;
    try {
      // every read looks: a missing dir is answered without an error built and thrown (~0.1 ms a page)
      mtime = statSync(this.dir, { throwIfNoEntry: false })?.mtimeMs ?? -1;
      // a store built from incident files appears in its own dir
      if (mtime >= 0) mtime += statSync(this.incidentDir, { throwIfNoEntry: false })?.mtimeMs ?? 0;
    } catch {
      // an unreadable dir is scanned (and its error reported) below
    }
    if (mtime === this.dirMtime && performance.now() - this.scannedAt < RESCAN_MS) return;
    this.dirMtime = mtime;
    this.scannedAt = performance.now();
    this.scan();
  }

  private scan(): void {
    let names: string[];
    try {
      names = this.scope === 'all' ? readdirSync(this.dir).filter((name) => name.endsWith('.db')) : [];
      this.dirError = null;
    } catch (err) {
      if (this.dirError === null)
        this.log.warn('cannot read data dir', { dir: this.dir, error: (err as Error).message });
      this.dirError = (err as Error).message;
      names = [];
    }
    // after the live stores, so that a live store wins over an incident's of the same id
    names.push(...incidentStores(this.dir));
    const present = new Set(names);
    for (const name of this.shadowed.keys()) if (!present.has(name)) this.shadowed.delete(name);
    for (const [name, file] of this.open) {
      if (!present.has(name)) this.drop(name, file, 'file is gone');
    }
    for (const name of names) this.visit(name);
    for (const name of this.failed.keys()) if (!present.has(name)) this.failed.delete(name);
    this.list = [...this.open.keys()].sort().map((name) => this.open.get(name)!.store);
  }

  private visit(name: string): void {
    const path = join(this.dir, name);
    let stat: Stats;
    try {
      stat = statSync(path);
    } catch {
      return; // removed between readdir and stat
    }
    if (!stat.isFile()) return;
    const known = this.open.get(name);
    if (known?.ino === stat.ino) return;
    if (known) this.drop(name, known, 'file was replaced');
    if (this.failed.get(name)?.signature === signature(stat)) return;
    if (this.shadowed.get(name) === signature(stat)) return;
    try {
      const store = NodeStore.open(path);
      const twinName = [...this.open.keys()].find(
        (n) => this.open.get(n)!.store.info.storeId === store.info.storeId,
      );
      if (twinName !== undefined && isIncidentStore(name)) {
        store.close();
        this.shadowed.set(name, signature(stat));
        return;
      }
      if (twinName !== undefined && isIncidentStore(twinName)) {
        const twin = this.open.get(twinName)!;
        this.drop(twinName, twin, 'a live store has its store id');
        this.shadowed.set(twinName, signatureOf(twin.store.path));
      } else if (twinName !== undefined) {
        store.close();
        throw new Error(`same store id as ${this.open.get(twinName)!.store.path} (a copy?)`);
      }
      this.open.set(name, { store, ino: stat.ino });
      this.failed.delete(name);
      this.log.info('store opened', { file: path, node: store.info.node, storeId: store.info.storeId });
    } catch (err) {
      if (!this.failed.has(name))
        this.log.warn('ignoring file: not a readable kreplay store', {
          file: path,
          error: (err as Error).message,
        });
      this.failed.set(name, { signature: signature(stat), reason: (err as Error).message });
    }
  }

  private drop(name: string, file: OpenFile, reason: string): void {
    file.store.close();
    this.open.delete(name);
    this.log.info('store closed', { file: file.store.path, reason });
  }

  close(): void {
    for (const [name, file] of this.open) {
      file.store.close();
      this.open.delete(name);
    }
    this.list = [];
  }
}

/** The incident stores' names relative to the data dir (none when the daemon has built none). */
function incidentStores(dataDir: string): string[] {
  try {
    return readdirSync(join(dataDir, INCIDENT_STORES_DIR))
      .filter((name) => name.endsWith('.db'))
      .sort()
      .map((name) => join(INCIDENT_STORES_DIR, name));
  } catch {
    return [];
  }
}
