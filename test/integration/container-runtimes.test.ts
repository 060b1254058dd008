/**
 * Go and libssl inside a container's root (real kernel, rootful podman with runc): the agent on
 * the host finds a static Go server's binary and the container's own libssl.so.3 through
 * /proc/PID/root, not the host's files, and attributes their requests exactly: the Go server's
 * handler and spawned goroutine writes, and a Python TLS server's (its Python hook off: only the
 * libssl probes see its requests' heads). Both run in one container, reached on published ports.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { selfSignedCert } from '../../bench/tls-cert';
import { processListening } from '../../agent/runtimes/node/listening-sockets';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { buildGo } from '../support/go-build';
import { buildImage, usePodman, type Container } from '../support/podman';
import { httpLoad, scoreWrites, writesUnder, type LoadOptions } from '../support/request-accuracy';
import { waitFor } from '../support/wait';

const SUPPORT = join(__dirname, '..', 'support');
const REQUESTS = 64;
const LEVEL = 8;
/** where the servers write, in the container; a host directory mounted there, so the store names the host's path */
const OUT = '/srv/out';

const pods = usePodman('kreplay-ctrrt');
let dir: string;
let store: string;
let agent: AgentProcess | undefined;
let box: Container;

afterAll(async () => {
  await agent?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Requests `name-<i>` to the container port; their writes' attribution (each request writes `files`). */
async function measure(name: string, port: number, files: number, load: LoadOptions = {}) {
  const ids = Array.from({ length: REQUESTS }, (_, i) => `${name}-${i}`);
  await httpLoad(box.hostPort(port), ids, LEVEL, { answer: 'ok', ...load });
  const score = scoreWrites(
    await writesUnder(store, join(dir, 'out'), `${name}-`, REQUESTS * files),
    ids,
    files,
  );
  process.stdout.write(
    `${name} in a container: ${JSON.stringify(score)} of ${REQUESTS}, ${LEVEL} at a time\n`,
  );
  return score;
}

(pods.skip ? describe.skip : describe)('Go and libssl in a container (real kernel, podman)', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kreplay-ctrrt-'));
    store = join(dir, 'data', 'ctr.db');
    mkdirSync(join(dir, 'certs'));
    mkdirSync(join(dir, 'out'));
    selfSignedCert(join(dir, 'certs'));
    const go = buildGo(join(SUPPORT, 'runtimes', 'go-server.go'), join(dir, 'go-server'), 'static');
    const image = buildImage({
      name: 'go-tls',
      packages: ['python3'],
      files: [
        { from: go, to: '/srv/go-server' },
        { from: join(SUPPORT, 'tls-file-server.py'), to: '/srv/tls-file-server.py' },
      ],
    });
    box = pods.run({
      image,
      name: 'box',
      // the certificate names 127.0.0.1: reached through the published port
      extraArgs: ['--volume', `${join(dir, 'certs')}:/certs:ro`, '--volume', `${join(dir, 'out')}:${OUT}`],
      env: { KREPLAY_PYTHON_HOOK: 'off' },
      publish: [8080, 8443],
      command: [
        'sh',
        '-c',
        `mkdir -p ${OUT} && python3 -m http.server 9000 --bind 127.0.0.1 >/dev/null 2>&1 & ` +
          `python3 /srv/tls-file-server.py /certs/cert.pem /certs/key.pem ${OUT} 8443 0.0.0.0 & ` +
          `exec /srv/go-server ${OUT} 9000 20 0.0.0.0:8080`,
      ],
    });
    await waitFor(() => processListening(box.pid).some((s) => s.port === 8080), {
      what: 'the Go server listening',
    });
    agent = await startAgent([
      '--data-dir',
      join(dir, 'data'),
      '--node',
      'ctr',
      '--cgroup-id',
      String(box.cgroupId),
    ]);
  });

  it('attributes a static Go server in the container exactly (its binary found through /proc/PID/root)', async () => {
    const score = await measure('go', 8080, 2);
    expect({ wrong: score.wrong, missing: score.missing, none: score.none }).toEqual({
      wrong: 0,
      missing: 0,
      none: 0,
    });
  });

  it("attributes a Python TLS server in the container exactly by the container's own libssl", async () => {
    const score = await measure('tls', 8443, 2, {
      ca: readFileSync(join(dir, 'certs', 'cert.pem')),
      answer: 'ok\n',
    });
    expect({ wrong: score.wrong, missing: score.missing, none: score.none }).toEqual({
      wrong: 0,
      missing: 0,
      none: 0,
    });
  });
});
