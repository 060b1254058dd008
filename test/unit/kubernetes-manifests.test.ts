/**
 * deploy/kubernetes/ against Kubernetes' schemas (the OpenAPI definitions compiled by the npm
 * package kubernetes-models, test/support/validate-k8s.mjs): every document valid, a broken one
 * named with its fault; the agent's and daemon's arguments are flags `kreplay` knows; the agent
 * runs unprivileged in the host's pid namespace with bpffs and tracefs mounted; the daemon's
 * Service selects its pods.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

const ROOT = join(__dirname, '..', '..');
const DIR = join(ROOT, 'deploy', 'kubernetes');
const VALIDATE = join(ROOT, 'test', 'support', 'validate-k8s.mjs');
const FILES = readdirSync(DIR)
  .filter((f) => f.endsWith('.yaml'))
  .map((f) => join(DIR, f));

interface Checked {
  file: string;
  kind: string;
  name: string;
  error: string | null;
}
const validate = (files: string[]): Checked[] =>
  JSON.parse(execFileSync(process.execPath, [VALIDATE, ...files], { encoding: 'utf8' })) as Checked[];

interface Container {
  image: string;
  args: string[];
  securityContext?: { privileged?: boolean; capabilities?: { add?: string[]; drop?: string[] } };
  volumeMounts?: { mountPath: string }[];
}
interface Doc {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec: {
    selector?: Record<string, string> & { matchLabels?: Record<string, string> };
    template?: {
      metadata: { labels: Record<string, string> };
      spec: { hostPID?: boolean; containers: Container[] };
    };
  };
}
const docs: Doc[] = FILES.flatMap((f) =>
  parseAllDocuments(readFileSync(f, 'utf8')).map((d) => d.toJS() as Doc),
);
const byKind = (kind: string) => docs.find((d) => d.kind === kind)!;

/** The long options `kreplay <command> --help` lists. */
function knownFlags(command: string): Set<string> {
  const help = execFileSync(process.execPath, [join(ROOT, 'bin', 'kreplay.js'), command, '--help'], {
    encoding: 'utf8',
  });
  return new Set([...help.matchAll(/^\s+(?:-\w, )?(--[a-z0-9-]+)/gm)].map((m) => m[1]!));
}

describe('deploy/kubernetes', () => {
  it("validates every manifest against Kubernetes' schemas", () => {
    const checked = validate(FILES);
    expect(checked.map((c) => `${c.kind}/${c.name}`).sort()).toEqual([
      'DaemonSet/kreplay-agent',
      'Deployment/kreplay-daemon',
      'Namespace/kreplay',
      'Service/kreplay-daemon',
    ]);
    expect(checked.filter((c) => c.error !== null)).toEqual([]);
  });

  it('names the fault of a broken manifest (the validation is real)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kreplay-k8s-'));
    try {
      const broken = join(dir, 'broken.yaml');
      writeFileSync(
        broken,
        readFileSync(join(DIR, 'agent-daemonset.yaml'), 'utf8').replace('hostPID: true', 'hostPID: "yes"'),
      );
      const unknown = join(dir, 'unknown.yaml');
      writeFileSync(unknown, 'apiVersion: apps/v1\nkind: Daemonset\nmetadata: { name: x }\n');
      expect(validate([broken, unknown]).map((c) => c.error)).toEqual([
        expect.stringMatching(/hostPID must be boolean/),
        'no schema for kind Daemonset in apps/v1',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gives kreplay only flags it knows', () => {
    for (const doc of [byKind('DaemonSet'), byKind('Deployment')]) {
      const [command, ...args] = doc.spec.template!.spec.containers[0]!.args;
      const known = knownFlags(command!);
      expect(args.map((a) => a.split('=')[0]!).filter((flag) => !known.has(flag))).toEqual([]);
    }
  });

  it('runs the agent unprivileged in the host pid namespace, with bpffs, tracefs and BTF', () => {
    const pod = byKind('DaemonSet').spec.template!.spec;
    const agent = pod.containers[0]!;
    expect(pod.hostPID).toBe(true);
    expect(agent.securityContext?.privileged).toBe(false);
    expect(agent.securityContext?.capabilities?.drop).toEqual(['ALL']);
    expect(agent.volumeMounts?.map((m) => m.mountPath)).toEqual(
      expect.arrayContaining(['/sys/fs/bpf', '/sys/kernel/tracing', '/sys/kernel/btf']),
    );
  });

  it("selects the daemon's pods by its Service", () => {
    const service = byKind('Service');
    const deployment = byKind('Deployment');
    expect(deployment.spec.template!.metadata.labels).toMatchObject(service.spec.selector!);
    expect(deployment.spec.template!.metadata.labels).toMatchObject(deployment.spec.selector!.matchLabels!);
  });
});
