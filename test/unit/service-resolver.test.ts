import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { CgroupPaths } from '../../agent/attribution/cgroup-paths';
import { ServiceResolver } from '../../agent/attribution/service-resolver';
import type { ServiceRule } from '../../agent/config/config-schema';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();

function fakeProcess(pid: number, cgroupFile: string, exe = '/usr/bin/true'): void {
  mkdirSync(`${dir.path}/${pid}`);
  writeFileSync(`${dir.path}/${pid}/cgroup`, cgroupFile);
  symlinkSync(exe, `${dir.path}/${pid}/exe`);
}

const noCgroupMount = new CgroupPaths(null);
const resolver = (rules: ServiceRule[] = []) => new ServiceResolver(rules, noCgroupMount, dir.path);

describe('ServiceResolver', () => {
  it('defaults to the systemd service unit without .service, on v2 and on hybrid hosts', () => {
    fakeProcess(10, '0::/system.slice/nginx.service\n');
    fakeProcess(11, '1:name=systemd:/system.slice/api@2.service\n0::/\n');
    const r = resolver();
    expect(r.serviceOf({ pid: 10, comm: 'nginx', cgroupId: 1 })).toBe('nginx');
    expect(r.serviceOf({ pid: 11, comm: 'node', cgroupId: 1 })).toBe('api@2');
  });

  it('falls back to the comm outside services and for vanished processes', () => {
    fakeProcess(12, '0::/user.slice/session-1.scope\n');
    const r = resolver();
    expect(r.serviceOf({ pid: 12, comm: 'bash', cgroupId: 1 })).toBe('bash');
    expect(r.serviceOf({ pid: 99, comm: 'gone', cgroupId: 1 })).toBe('gone');
  });

  it('applies the first rule whose conditions all hold', () => {
    fakeProcess(13, '0::/system.slice/payments.service\n', '/opt/pay/bin/server');
    const r = resolver([
      { service: 'never', match: { unit: 'payments.service', comm: 'other' } },
      { service: 'pay', match: { unit: 'pay*.service', exe: '/opt/pay/*' } },
      { service: 'late', match: { comm: 'server' } },
    ]);
    expect(r.serviceOf({ pid: 13, comm: 'server', cgroupId: 1 })).toBe('pay');
    const byCgroup = resolver([{ service: 'sys', match: { cgroup: '/system.slice/*' } }]);
    expect(byCgroup.serviceOf({ pid: 13, comm: 'server', cgroupId: 1 })).toBe('sys');
  });

  it('re-resolves when a process execs (new comm)', () => {
    fakeProcess(14, '0::/\n');
    const r = resolver([{ service: 'py', match: { comm: 'python3' } }]);
    expect(r.serviceOf({ pid: 14, comm: 'sh', cgroupId: 1 })).toBe('sh');
    expect(r.serviceOf({ pid: 14, comm: 'python3', cgroupId: 1 })).toBe('py');
  });
});
