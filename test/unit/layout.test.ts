/** The folder tree says what depends on what: these imports would make it lie. */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');

function sources(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => join(folder, file));
}

/** Repository-relative paths of the modules `file` imports from the project. */
function imports(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(/from '(\.[^']+)'/g)].map((m) =>
    relative(ROOT, resolve(ROOT, dirname(file), m[1]!)),
  );
}

function offending(folder: string, forbidden: string): string[] {
  return sources(folder).flatMap((file) =>
    imports(file)
      .filter((target) => target === forbidden || target.startsWith(`${forbidden}/`))
      .map((target) => `${file} -> ${target}`),
  );
}

describe('layout', () => {
  it.each([
    ['daemon', 'agent'],
    ['core', 'agent'],
    ['core', 'daemon'],
    ['core', 'cli'],
    ['agent', 'daemon'],
    ['agent/ingest', 'agent/store'],
    ['daemon/replay/stream', 'daemon/replay/sessions'],
    // the stores know nothing of who asks: HTTP, the events routes and replay build on them
    ['daemon/store', 'daemon/http'],
    ['daemon/store', 'daemon/events'],
    ['daemon/store', 'daemon/replay'],
    // the clock and the streams meet only in what replay/ shares with both (replay-clock, send-buffer)
    ['daemon/replay/stream', 'daemon/replay/clock'],
    ['daemon/replay/clock', 'daemon/replay/stream'],
    ['bench', 'test'],
  ])('%s imports nothing from %s', (folder, forbidden) => {
    expect(offending(folder, forbidden)).toEqual([]);
  });

  it('sees the imports it forbids elsewhere (the check itself works)', () => {
    expect(offending('agent/store', 'agent/ingest')).toContain(
      'agent/store/event-insert.ts -> agent/ingest/event-batch',
    );
  });
});
