/** The generated reference pages (tools/reference-pages.ts) are as their sources make them today. */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { configKeys } from '../../tools/config-reference';
import { referencePages } from '../../tools/reference-pages';

const ROOT = resolve(__dirname, '..', '..');
const PAGES = ['cli', 'http-api', 'errors', 'metrics', 'config'].map((page) => `docs/reference/${page}.md`);

describe('generated reference pages', () => {
  let pages: Record<string, string>;
  beforeAll(async () => {
    pages = await referencePages();
  });

  it('are the pages listed here', () => {
    expect(Object.keys(pages).sort()).toEqual([...PAGES].sort());
  });

  it.each(PAGES)('%s is current (else run `make docs`)', (path) => {
    expect(readFileSync(join(ROOT, path), 'utf8')).toBe(pages[path]);
  });

  it('covers every command, route and code', () => {
    expect(pages['docs/reference/cli.md']).toContain('## `kreplay replay`');
    expect(pages['docs/reference/cli.md']).toContain('## `kreplay incident show`');
    expect(pages['docs/reference/http-api.md']).toContain('## `GET /api/events`');
    expect(pages['docs/reference/errors.md']).toContain('| `E_STORE_LOCKED` |');
    expect(pages['docs/reference/errors.md']).toContain(
      'session-not-found` | 404 Not Found | `E_SESSION_NOT_FOUND` |',
    );
    expect(pages['docs/reference/errors.md']).toContain('| `E_HPACK` |');
  });

  it("lists every metric with its labels' values, the agent's and the daemon's", () => {
    const metrics = pages['docs/reference/metrics.md']!;
    // every event type and every ring-full reason, as the kernel's counters have them
    expect(metrics).toContain('`type`: `sys_write`, `sys_read`, `sys_fsync`, `sys_connect`, `block_io`');
    for (const reason of ['sys_read_ring_full', 'sys_fsync_ring_full', 'sys_connect_ring_full'])
      expect(metrics).toContain(`\`${reason}\``);
    expect(metrics).toContain(
      '| `kreplay_agent_runtime_hooks_total` | counter | `runtime`: `node`, `python`, `go`, `jvm`; `outcome`: `hooked`, `refused`, `failed`, `out_of_scope`, `no_hook` |',
    );
    expect(metrics).toMatch(/\| `kreplay_agent_otlp_spans_total` \| counter \|/);
    expect(metrics).toMatch(/\| `kreplay_agent_store_commit_seconds` \| histogram \| {2}\|/);
    expect(metrics).toContain('`state`: `ready`, `playing`, `paused`, `finished`, `stopped`');
    expect(metrics).toMatch(/\| `kreplay_http_requests_total` \| counter \| `method`; `route`; `status` \|/);
    expect(metrics).not.toContain('process_cpu');
  });

  it('describes every key of the config file', () => {
    const keys = configKeys();
    expect(keys.map((key) => key.path)).toEqual(
      expect.arrayContaining([
        'node',
        'services[].match.comm',
        'capture.python_hook',
        'capture.hook_include',
        'otlp.queue_spans',
      ]),
    );
    expect(keys.filter((key) => !key.description).map((key) => key.path)).toEqual([]);
  });
});
