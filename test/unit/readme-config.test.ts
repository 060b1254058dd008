/** docs/operate.md's `--config` example is parsed by the agent's own loader, so the documentation cannot drift. */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../agent/config/load-config';
import {
  agentConfigSchema,
  captureConfigSchema,
  otlpConfigSchema,
  serviceRuleSchema,
} from '../../agent/config/config-schema';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();

function readmeExample(): string {
  const readme = readFileSync(join(__dirname, '..', '..', 'docs', 'operate.md'), 'utf8');
  const section = readme.split(/^## /m).find((s) => s.startsWith('The `--config` file'));
  const block = section && /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('docs/operate.md has no yaml example under "## The `--config` file"');
  return block;
}

describe("the README's --config example", () => {
  it('loads with the agent config loader', () => {
    const path = join(dir.path, 'agent.yaml');
    writeFileSync(path, readmeExample());
    const config = loadConfig(path);
    expect(config.node).toBe('web-1');
    expect(config.services.map((s) => s.service)).toEqual(['api', 'reports', 'db']);
    expect(config.services[1]!.match).toEqual({ cgroup: '/system.slice/cron.service/*', comm: 'python3*' });
    expect(config.otlp).toMatchObject({ endpoint: 'http://otel-collector:4318', sample: 'sampled' });
  });

  it('every yaml block of docs/operate.md loads with the agent config loader', () => {
    const page = readFileSync(join(__dirname, '..', '..', 'docs', 'operate.md'), 'utf8');
    const blocks = [...page.matchAll(/^```yaml\n([\s\S]*?)^```/gm)].map((m) => m[1]!);
    expect(blocks.length).toBeGreaterThan(1);
    blocks.forEach((block, i) => {
      const path = join(dir.path, `block-${i}.yaml`);
      writeFileSync(path, block);
      expect(() => loadConfig(path)).not.toThrow();
    });
  });

  it('shows every key the loader accepts', () => {
    const example = readmeExample();
    const keys = [
      ...Object.keys(agentConfigSchema.shape),
      ...Object.keys(serviceRuleSchema.shape),
      ...Object.keys(serviceRuleSchema.shape.match.shape),
      ...Object.keys(captureConfigSchema.shape),
      ...Object.keys(otlpConfigSchema.shape),
    ];
    for (const key of keys) expect(example).toMatch(new RegExp(`^\\s*(- )?${key}:`, 'm'));
  });
});
