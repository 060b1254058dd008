/**
 * The tests' podman (test/support/podman.ts) as the container tests rely on it: an image from a
 * minbase rootfs with the pinned Node copied in, two containers of it, each with its own host pid,
 * cgroup named by its id, labels, bridge address and a published port that answers.
 */
import { request } from 'node:http';
import { buildImage, PINNED_NODE, usePodman } from '../support/podman';
import { waitFor } from '../support/wait';

const pods = usePodman('kreplay-podsupport');
const get = (url: string) =>
  new Promise<string>((resolve, reject) =>
    request(url, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve(body));
    })
      .on('error', reject)
      .end(),
  );

(pods.skip ? describe.skip : describe)('podman test support', () => {
  it('runs two containers of one image, each told apart by id, cgroup, pid and port', async () => {
    const image = buildImage({
      name: 'node',
      packages: ['libstdc++6'],
      files: [{ from: PINNED_NODE, to: '/usr/local/bin/node' }],
    });
    const server = `require('http').createServer((q, s) => s.end(process.env.WHO + ' ' + process.pid)).listen(8080)`;
    const [a, b] = ['a', 'b'].map((who) =>
      pods.run({
        image,
        name: who,
        command: ['node', '-e', server],
        env: { WHO: who },
        labels: { 'io.kubernetes.pod.name': `pod-${who}` },
        publish: [8080],
      }),
    );
    for (const [c, who] of [
      [a!, 'a'],
      [b!, 'b'],
    ] as const) {
      expect(c.cgroup).toMatch(new RegExp(`/libpod-${c.id}$`));
      expect(c.ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      // the server is pid 1 inside, a host pid outside
      const body = await waitForBody(`http://127.0.0.1:${c.hostPort(8080)}/`);
      expect(body).toBe(`${who} 1`);
      expect(c.exec(['cat', '/proc/1/cmdline']).stdout).toContain('node');
      expect(JSON.parse(c.inspect('{{json .Config.Labels}}'))).toMatchObject({
        'io.kubernetes.pod.name': `pod-${who}`,
      });
    }
    expect(a!.pid).not.toBe(b!.pid);
  });
});

const waitForBody = (url: string) => waitFor(() => get(url).catch(() => undefined), 20_000);
