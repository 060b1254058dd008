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
  ])('names the problem in %s', (text, message) => {
    expect(() => parseConfig(text, 'c.json', 'json')).toThrow(message);
  });

  it('names unreadable files and unknown extensions', () => {
    expect(() => loadConfig(`${dir.path}/missing.yaml`)).toThrow(/cannot read config file .*missing\.yaml/);
    writeFileSync(`${dir.path}/c.toml`, '');
    expect(() => loadConfig(`${dir.path}/c.toml`)).toThrow(ConfigError);
    writeFileSync(`${dir.path}/bad.yaml`, 'services: [\n');
    expect(() => loadConfig(`${dir.path}/bad.yaml`)).toThrow(/bad\.yaml is not valid YAML/);
  });
});
