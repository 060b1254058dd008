/** --include/--exclude selectors: their syntax, and how services and cgroup paths resolve to cgroup ids. */
import { CgroupPaths } from '../../agent/attribution/cgroup-paths';
import { ServiceResolver } from '../../agent/attribution/service-resolver';
import { CgroupSelection, type FilterOptions } from '../../agent/filter/capture-filter';
import { describeFilter, parseSampleRate, parseSelector, SelectorError } from '../../agent/filter/selector';

/** A cgroup tree of fixed ids and paths. */
class FixedCgroups extends CgroupPaths {
  constructor(private readonly tree: Map<number, string>) {
    super(null);
  }
  override all(): Map<number, string> {
    return this.tree;
  }
}

const tree = new Map([
  [1, '/'],
  [2, '/system.slice'],
  [3, '/system.slice/nginx.service'],
  [4, '/system.slice/backup.service'],
  [5, '/system.slice/backup.service/worker'],
  [6, '/user.slice/user-1000.slice/session-2.scope'],
  [7, '/kubepods/pod-a/api'],
]);

function selection(filter: FilterOptions, services = new ServiceResolver([])): CgroupSelection {
  return new CgroupSelection(filter, services, new FixedCgroups(tree));
}

describe('selectors', () => {
  it.each([
    ['service:nginx', { kind: 'service', name: 'nginx' }],
    ['cgroup:/system.slice/', { kind: 'cgroup', path: '/system.slice' }],
    ['cgroup:/', { kind: 'cgroup', path: '/' }],
    ['comm:python3', { kind: 'comm', comm: 'python3' }],
    ['pid:42', { kind: 'pid', pid: 42 }],
    ['cgroup-id:18446744073709551615', { kind: 'cgroup-id', id: 2n ** 64n - 1n }],
  ])('reads %s', (text, selector) => {
    expect(parseSelector(text)).toEqual(selector);
  });

  it.each([
    ['nginx', /is not a filter/],
    ['service:', /is not a filter/],
    ['user:root', /unknown filter kind "user"/],
    ['cgroup:system.slice', /starts with \//],
    ['comm:a-very-long-command', /at most 15 bytes/],
    ['pid:0', /pid from 1/],
    ['pid:x', /pid from 1/],
    ['cgroup-id:0', /cgroup v2 id/],
    ['cgroup-id:18446744073709551616', /cgroup v2 id/],
  ])('refuses %s, naming the problem', (text, message) => {
    expect(() => parseSelector(text)).toThrow(SelectorError);
    expect(() => parseSelector(text)).toThrow(message);
  });

  it('reads sampling rates as 1/N', () => {
    expect(parseSampleRate('1/100')).toBe(100);
    expect(parseSampleRate('7')).toBe(7);
    expect(parseSampleRate('1/1')).toBe(1);
    for (const bad of ['0', '1/0', '2/3', '1/2.5', '', '1/1000001'])
      expect(() => parseSampleRate(bad)).toThrow(/not a sampling rate/);
  });

  it('describes the filter a run records, null when everything is captured', () => {
    expect(describeFilter({ exclude: [], filterTransactions: false })).toBeNull();
    expect(
      JSON.parse(
        describeFilter({
          include: [parseSelector('service:api')],
          exclude: [parseSelector('cgroup-id:9')],
          filterTransactions: true,
        })!,
      ),
    ).toEqual({ include: ['service:api'], exclude: ['cgroup-id:9'], filter_transactions: true });
  });
});

describe('cgroup selection', () => {
  it('resolves a cgroup path to that cgroup and those under it, with globs', () => {
    const ids = selection({
      include: [parseSelector('cgroup:/system.slice/backup.service')],
      exclude: [parseSelector('cgroup:/user.slice/*'), parseSelector('cgroup-id:99')],
      filterTransactions: false,
    }).resolve();
    expect(ids).toEqual({ include: [4n, 5n], exclude: [99n, 6n] });
  });

  it('resolves a service by its systemd unit or a config rule on cgroup or unit', () => {
    const services = new ServiceResolver([
      { service: 'api', match: { cgroup: '/kubepods/*/api' } },
      { service: 'web', match: { unit: 'nginx.service' } },
    ]);
    const ids = (name: string) =>
      selection(
        { include: [parseSelector(`service:${name}`)], exclude: [], filterTransactions: false },
        services,
      ).resolve().include;
    expect(ids('api')).toEqual([7n]);
    expect(ids('web')).toEqual([3n]);
    // the unit's name, in its cgroup and the ones under it
    expect(ids('backup')).toEqual([4n, 5n]);
    expect(ids('nginx')).toEqual([]);
  });

  it('leaves out cgroups whose service a comm or exe rule decides per process', () => {
    const services = new ServiceResolver([{ service: 'db', match: { comm: 'postgres' } }]);
    expect(services.serviceOfCgroup('/system.slice/nginx.service')).toBeNull();
    expect(new ServiceResolver([]).serviceOfCgroup('/user.slice/user-1000.slice/session-2.scope')).toBeNull();
  });

  it('tells when the ids changed, and hands the kernel pids, comms and cgroup ids', () => {
    const cgroups = selection({
      include: [parseSelector('pid:10'), parseSelector('comm:sh'), parseSelector('service:nginx')],
      exclude: [],
      filterTransactions: true,
    });
    expect(cgroups.live).toBe(true);
    expect(cgroups.captureOptions()).toEqual({
      include: [{ pid: 10 }, { comm: 'sh' }, { cgroupId: 3n }],
      exclude: [],
      liveCgroups: true,
      filterTransactions: true,
    });
    expect(cgroups.changed()).toBeNull();
    tree.set(8, '/system.slice/nginx.service/child');
    try {
      expect(cgroups.changed()).toEqual({ include: [3n, 8n], exclude: [] });
    } finally {
      tree.delete(8);
    }
  });

  it('without includes captures everything but what is excluded', () => {
    const options = selection({
      exclude: [parseSelector('comm:cron')],
      filterTransactions: false,
    }).captureOptions();
    expect(options.include).toBeUndefined();
    expect(options.exclude).toEqual([{ comm: 'cron' }]);
    expect(options.liveCgroups).toBe(false);
  });
});
