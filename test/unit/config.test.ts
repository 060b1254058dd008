import { writeFileSync } from 'node:fs';
import { ConfigError, loadConfig, parseConfig } from '../../agent/config/load-config';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();

describe('agent config', () => {
  it('reads YAML and JSON rules', () => {
    const yaml = `node: web-1\nservices:\n  - service: api\n    match: { unit: "api-*.service" }\n`;
    writeFileSync(`${dir.path}/c.yaml`, yaml);
    expect(loadConfig(`${dir.path}/c.yaml`)).toEqual({
      node: 'web-1',
      services: [{ service: 'api', match: { unit: 'api-*.service' } }],
      capture: {
        exclude: [],
        filter_transactions: false,
        sample_background: 1,
        capture_reads: false,
        node_hook: true,
        python_hook: true,
        hook_exclude: [],
      },
    });
    writeFileSync(
      `${dir.path}/c.json`,
      JSON.stringify({ services: [{ service: 'db', match: { comm: 'postgres', exe: '/usr/*' } }] }),
    );
    expect(loadConfig(`${dir.path}/c.json`).services[0]!.match).toEqual({ comm: 'postgres', exe: '/usr/*' });
  });

  it.each([
    [
      '{"services": [{"service": "a", "match": {}}]}',
      /services\.0\.match: needs at least one of unit, cgroup, comm, exe/,
    ],
    ['{"services": [{"service": "a", "match": {"pid": 1}}]}', /services\.0\.match: Unrecognized key.*pid/],
    ['{"srvices": []}', /\(root\): Unrecognized key.*srvices/],
    ['{"node": "a b"}', /node: letters, digits/],
    ['{"services": "x"}', /services: /],
    ['{not json', /is not valid JSON/],
    [
      '{"capture": {"include": ["nginx"]}}',
      /capture\.include\.0: "nginx" is not a filter: expected service:NAME/,
    ],
    ['{"capture": {"exclude": ["user:root"]}}', /capture\.exclude\.0: .*unknown filter kind "user"/],
    ['{"capture": {"exclude": ["comm:a-very-long-command"]}}', /at most 15 bytes/],
    ['{"capture": {"exclude": ["cgroup:system.slice"]}}', /starts with \//],
    [
      '{"capture": {"sample_background": "2/3"}}',
      /capture\.sample_background: "2\/3" is not a sampling rate/,
    ],
    ['{"capture": {"sample_background": 0}}', /expected 1\/N with N from 1/],
    ['{"capture": {"filter": []}}', /capture: Unrecognized key.*filter/],
  ])('names the problem in %s', (text, message) => {
    expect(() => parseConfig(text, 'c.json', 'json')).toThrow(message);
  });

  it('reads the capture section: selectors parsed, sampling as 1/N', () => {
    const yaml = [
      'capture:',
      '  include: ["service:nginx", "cgroup:/system.slice/", "comm:python3", "pid:42", "cgroup-id:7"]',
      '  exclude: ["cgroup:/user.slice/*"]',
      '  filter_transactions: true',
      '  sample_background: 1/100',
      '  capture_reads: true',
      '  hook_include: ["exe:/usr/bin/python3*", "service:api"]',
      '  hook_exclude: ["comm:celery"]',
    ].join('\n');
    expect(parseConfig(yaml, 'c.yaml', 'yaml').capture).toEqual({
      include: [
        { kind: 'service', name: 'nginx' },
        { kind: 'cgroup', path: '/system.slice' },
        { kind: 'comm', comm: 'python3' },
        { kind: 'pid', pid: 42 },
        { kind: 'cgroup-id', id: 7n },
      ],
      exclude: [{ kind: 'cgroup', path: '/user.slice/*' }],
      filter_transactions: true,
      sample_background: 100,
      capture_reads: true,
      node_hook: true,
      python_hook: true,
      hook_include: [
        { kind: 'exe', path: '/usr/bin/python3*' },
        { kind: 'service', name: 'api' },
      ],
      hook_exclude: [{ kind: 'comm', comm: 'celery' }],
    });
    // the capture's kernel filter cannot tell executables; a bad hook selector is named
    expect(() => parseConfig('capture: { include: ["exe:/usr/bin/node"] }', 'c.yaml', 'yaml')).toThrow(
      'a filter cannot select by exe',
    );
    expect(() => parseConfig('capture: { hook_exclude: ["exe:node"] }', 'c.yaml', 'yaml')).toThrow(
      '"exe:node": an executable is an absolute path',
    );
    expect(parseConfig('capture: { sample_background: 8 }', 'c.yaml', 'yaml').capture.sample_background).toBe(
      8,
    );
  });

  it('names unreadable files and unknown extensions', () => {
    expect(() => loadConfig(`${dir.path}/missing.yaml`)).toThrow(/cannot read config file .*missing\.yaml/);
    writeFileSync(`${dir.path}/c.toml`, '');
    expect(() => loadConfig(`${dir.path}/c.toml`)).toThrow(ConfigError);
    writeFileSync(`${dir.path}/bad.yaml`, 'services: [\n');
    expect(() => loadConfig(`${dir.path}/bad.yaml`)).toThrow(/bad\.yaml is not valid YAML/);
  });
});
