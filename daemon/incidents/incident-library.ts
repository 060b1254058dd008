/**
 * The incident files a daemon serves (run on its incident thread, see
 * incident-thread.ts: decoding a large file and building its store take
 * seconds the daemon's main thread must not spend): those an SRE drops into
 * `<data-dir>/incidents/*.kri` (read-only: the daemon never changes them)
 * and those uploaded with POST /api/incidents (kept in
 * `<data-dir>/.replay/incidents/`). Each store id their events come from
 * becomes one read-only node store in INCIDENT_STORES_DIR, built from every
 * incident that holds events of that store, so the node-store readers serve
 * them like any store. Stores are rebuilt only when the files that make one
 * change. A file that is not a sound incident file is skipped and listed
 * with the reason.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import Database from 'better-sqlite3';
import { decodeIncident, IncidentFileError, readIncidentBytesSync, type Incident } from '../../core/incident';
import { parseEventId } from '../../core/model';
import type { Logger } from '../../core/log/logger';
import { INCIDENT_STORES_DIR } from '../store/store-directory';
import { IncidentStoreBuilder, storeSources } from './incident-store';

/** Where dropped-in incident files are read, and where uploads are kept, under the data dir. */
export const INCIDENTS_DIR = 'incidents';
export const UPLOADED_INCIDENTS_DIR = join('.replay', 'incidents');
const EXTENSION = '.kri';

/** One incident file as GET /api/incidents lists it. */
export interface IncidentEntry {
  /** the first 16 hex digits of its digest: the same content is one incident */
  id: string;
  file: string;
  origin: 'dropped' | 'uploaded';
  transaction_id: string;
  events: number;
  digest: string;
  exported_at: string;
  kreplay_version: string;
  source: string;
  first_ns: bigint | null;
  end_ns: bigint | null;
  redacted: string[];
  /** the recording runs it holds; null: unknown (exported from ClickHouse) */
  runs: number | null;
  /** the stores its events come from */
  store_ids: string[];
}

export interface SkippedIncident {
  file: string;
  reason: string;
}

/** What the library holds: its incidents, and the files it skipped with why. */
export interface IncidentListing {
  incidents: IncidentEntry[];
  skipped: SkippedIncident[];
}

interface Known {
  signature: string;
  entry: IncidentEntry | null;
  reason?: string;
}

const signatureOf = (path: string) => {
  const stat = statSync(path);
  return `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
};

/** The store an event belongs to: its event id's, else one made up from the file's digest. */
function storeOf(eventId: string, digest: string): string {
  return parseEventId(eventId)?.storeId ?? digest.slice('sha256:'.length, 'sha256:'.length + 12);
}

export class IncidentLibrary {
  private readonly known = new Map<string, Known>();
  private builtFrom = '';

  constructor(
    private readonly dataDir: string,
    private readonly log: Logger,
  ) {}

  private files(): { path: string; origin: IncidentEntry['origin'] }[] {
    const list = (dir: string, origin: IncidentEntry['origin']) => {
      try {
        return readdirSync(join(this.dataDir, dir))
          .filter((name) => name.endsWith(EXTENSION))
          .sort()
          .map((name) => ({ path: join(this.dataDir, dir, name), origin }));
      } catch {
        return [];
      }
    };
    return [...list(INCIDENTS_DIR, 'dropped'), ...list(UPLOADED_INCIDENTS_DIR, 'uploaded')];
  }

  private read(path: string): Incident {
    return decodeIncident(readIncidentBytesSync(path), path);
  }

  /** Looks at the files again; builds the stores whose incidents changed. */
  refresh(): void {
    const files = this.files();
    const present = new Set(files.map((f) => f.path));
    for (const path of this.known.keys()) if (!present.has(path)) this.known.delete(path);
    for (const { path, origin } of files) {
      let signature: string;
      try {
        signature = signatureOf(path);
      } catch {
        continue; // removed meanwhile
      }
      if (this.known.get(path)?.signature === signature) continue;
      try {
        const incident = this.read(path);
        this.known.set(path, { signature, entry: entryOf(path, origin, incident) });
        this.log.info('incident file served', { file: path, transaction_id: incident.header.transaction_id });
      } catch (err) {
        const reason = err instanceof IncidentFileError ? err.message : `${path}: ${(err as Error).message}`;
        this.known.set(path, { signature, entry: null, reason });
        this.log.warn('skipping incident file', { file: path, error: reason });
      }
    }
    const state = [...this.known].map(([path, k]) => `${path}=${k.signature}`).join('\n');
    if (state === this.builtFrom) return;
    this.builtFrom = state;
    try {
      this.build();
    } catch (err) {
      // a read-only data dir, a full disk: the incidents are listed but not served; said once per change
      this.log.warn('cannot build the stores of incident files', { error: (err as Error).message });
    }
  }

  /** Each store id's incidents (by digest), its built store made again where they changed, stale ones removed. */
  private build(): void {
    const dir = join(this.dataDir, INCIDENT_STORES_DIR);
    if (this.known.size === 0 && !existsSync(dir)) return; // nothing to serve, nothing to remove
    mkdirSync(dir, { recursive: true });
    const byStore = new Map<string, { paths: string[]; digests: Set<string> }>();
    for (const [path, { entry }] of this.known) {
      if (!entry) continue;
      for (const storeId of entry.store_ids) {
        let group = byStore.get(storeId);
        if (!group) byStore.set(storeId, (group = { paths: [], digests: new Set() }));
        group.paths.push(path);
        group.digests.add(entry.digest);
      }
    }
    for (const name of readdirSync(dir))
      if (!byStore.has(name.replace(/\.db(\.partial)?$/, '')) || name.endsWith('.partial'))
        rmSync(join(dir, name), { force: true });
    for (const [storeId, group] of byStore) {
      const sources = [...group.digests].sort().join(',');
      const path = join(dir, `${storeId}.db`);
      if (builtSources(path) === sources) continue;
      this.buildStore(path, storeId, group.paths, sources);
    }
  }

  private buildStore(path: string, storeId: string, paths: string[], sources: string): void {
    let builder: IncidentStoreBuilder | null = null;
    try {
      for (const file of paths) {
        const incident = this.read(file);
        const digest = incident.header.digest;
        const events = incident.events.filter((e) => storeOf(e.event_id, digest) === storeId);
        builder ??= new IncidentStoreBuilder(path, storeId, events[0]?.node ?? 'incident', sources);
        for (const event of events) builder.add(event);
        for (const run of incident.runs ?? []) if (run.store_id === storeId) builder.addRun(run);
      }
      builder?.finish();
      this.log.info('incident store built', { file: path, incidents: paths.length });
    } catch (err) {
      builder?.abandon();
      this.log.warn('cannot build the store of incident files', {
        file: path,
        error: (err as Error).message,
      });
    }
  }

  /** What is served and what is skipped, as the files are now. */
  listing(): IncidentListing {
    this.refresh();
    return {
      incidents: [...this.known.values()].flatMap((k) => (k.entry ? [k.entry] : [])),
      skipped: [...this.known].flatMap(([file, k]) => (k.reason ? [{ file, reason: k.reason }] : [])),
    };
  }

  /** Checks the bytes whole, keeps them under their digest, and serves them; the same content twice is one file. */
  upload(bytes: Buffer): IncidentEntry {
    const incident = decodeIncident(bytes, 'the uploaded file');
    const id = incident.header.digest.slice('sha256:'.length, 'sha256:'.length + 16);
    const dir = join(this.dataDir, UPLOADED_INCIDENTS_DIR);
    mkdirSync(dir, { recursive: true });
    const path = join(dir, `${id}${EXTENSION}`);
    const same = this.known.get(path);
    if (!same?.entry) {
      writeFileSync(`${path}.partial`, bytes);
      renameSync(`${path}.partial`, path);
    }
    this.refresh();
    return this.known.get(path)?.entry ?? entryOf(path, 'uploaded', incident);
  }
}

/** The sources a built store was made from ('' when there is none or it cannot be read). */
function builtSources(path: string): string {
  try {
    const db = new Database(path, { readonly: true, fileMustExist: true });
    try {
      return storeSources(db) ?? '';
    } finally {
      db.close();
    }
  } catch {
    return '';
  }
}

function entryOf(path: string, origin: IncidentEntry['origin'], incident: Incident): IncidentEntry {
  const h = incident.header;
  return {
    id: h.digest.slice('sha256:'.length, 'sha256:'.length + 16),
    file: basename(path),
    origin,
    transaction_id: h.transaction_id,
    events: h.events,
    digest: h.digest,
    exported_at: h.exported_at,
    kreplay_version: h.kreplay_version,
    source: h.source,
    first_ns: h.first_ns,
    end_ns: h.end_ns,
    redacted: h.redacted,
    runs: incident.runs === null ? null : incident.runs.length,
    store_ids: [...new Set(incident.events.map((e) => storeOf(e.event_id, h.digest)))].sort(),
  };
}
