/**
 * The JVM injector of the process discovery (agent/runtimes/discovery): loads the JVM hook
 * (kreplay-jvm-hook.jar, built from hook/ by `make`) into each HotSpot JVM it is handed, by the
 * JVM's own dynamic attach (hotspot-attach.ts). Never into kreplay's own processes, nor one that
 * opted out (KREPLAY_JVM_HOOK=off in its environment), disabled its attach mechanism, or would die
 * of SIGQUIT; nor from a jar another user could have changed (every directory above it and the
 * jar root's, not writable by others), nor into a JVM that sees another file at the jar's path (a
 * container: its mount namespace).
 */
import { readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { FoundProcess, InjectResult, RuntimeInjector } from '../discovery/runtime-hook';
import { HOOK_SIGNAL } from '../node/hook-signal';
import { isKreplays } from '../python/python-hooks';
import {
  AttachError,
  attachCommand,
  loadFailure,
  openAttachListener,
  sendAttachCommand,
} from './hotspot-attach';
import {
  attachRefusal,
  catchesQuit,
  effectiveIds,
  jvmOptedOut,
  jvmOptions,
  namespacePid,
} from './jvm-process';

/** Scans a JVM that does not handle SIGQUIT yet (still starting) is asked again across. */
const MAX_ATTEMPTS = 20;

type JvmProcess = FoundProcess<{ runtime: 'jvm' }>;

/** The hook's jar: beside this module, in dist/ (the build puts it there) and in the packages. */
export function jvmHookJar(): string {
  return join(__dirname, 'kreplay-jvm-hook.jar');
}

/** The agent's argument: the layout of the unit signal the Node hook is given too, as `name=value,…`. */
export function jvmHookArgs(): string {
  return Object.entries(HOOK_SIGNAL)
    .map(([name, value]) => `${name}=${value}`)
    .join(',');
}

/**
 * Why the jar at `path` may not go into other users' processes, or null: it, and every directory
 * above it, must be root's and writable by no one else (nobody could swap what the JVMs load), and
 * readable by all (a JVM of any user opens it).
 */
export function unsafeJar(
  path: string,
  stat: (p: string) => { uid: number; mode: number } = statSync,
): string | null {
  let st;
  try {
    st = stat(path);
  } catch {
    return `the hook's jar ${path} is missing (make builds it)`;
  }
  if ((st.mode & 0o004) === 0) return `the hook's jar ${path} is not readable by other users`;
  for (let at = path; ; at = dirname(at)) {
    const s = at === path ? st : stat(at);
    if (s.uid !== 0 || (s.mode & 0o022) !== 0)
      return `${at} is not root's or is writable by others: the hook's jar could be changed under it`;
    if (at !== path && (s.mode & 0o001) === 0) return `${at} is not searchable by other users`;
    if (at === dirname(at)) return null;
  }
}

export class JvmHookInjector implements RuntimeInjector<JvmProcess['classification']> {
  readonly maxTries = MAX_ATTEMPTS;
  readonly hookedMessage = "loaded the JVM hook (HotSpot's dynamic attach)";
  private readonly command: Buffer;
  private readonly jarRefusal: string | null;

  constructor(private readonly jar = jvmHookJar()) {
    this.jarRefusal = unsafeJar(jar);
    this.command = attachCommand('load', ['instrument', 'false', `${jar}=${jvmHookArgs()}`]);
  }

  async inject({ pid }: JvmProcess): Promise<InjectResult> {
    let cmdline: string;
    let environ: string;
    let status: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'latin1');
      environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
      status = readFileSync(`/proc/${pid}/status`, 'utf8');
    } catch {
      return { outcome: 'gone' };
    }
    if (isKreplays(pid)) return { outcome: 'refused', reason: "kreplay's own process, or one kreplay runs" };
    if (jvmOptedOut(environ))
      return { outcome: 'refused', reason: 'KREPLAY_JVM_HOOK=off in its environment' };
    const refusal = attachRefusal(jvmOptions(cmdline, environ)) ?? this.jarRefusal ?? this.elsewhere(pid);
    if (refusal) return { outcome: 'refused', reason: refusal };
    const ids = effectiveIds(status);
    if (!ids) return { outcome: 'gone' };
    if (!catchesQuit(status))
      return {
        outcome: 'retry',
        then: { outcome: 'refused', reason: `it did not handle SIGQUIT in ${MAX_ATTEMPTS} looks: no attach` },
      };
    try {
      const socket = await openAttachListener({ pid, nspid: namespacePid(status, pid), ...ids });
      const failure = loadFailure(await sendAttachCommand(socket, this.command));
      return failure ? { outcome: 'failed', reason: failure } : { outcome: 'hooked' };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') return { outcome: 'gone' };
      if (!(err instanceof AttachError)) throw err;
      return { outcome: 'failed', reason: err.message };
    }
  }

  /** Why the JVM would not load this very jar: it sees another file (or none) at its path. */
  private elsewhere(pid: number): string | null {
    try {
      const ours = statSync(this.jar);
      const theirs = statSync(`/proc/${pid}/root${this.jar}`);
      if (ours.dev === theirs.dev && ours.ino === theirs.ino) return null;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM')
        return `the agent may not look into its root (/proc/${pid}/root: ${code}): the JVM hook needs CAP_SYS_PTRACE`;
    }
    return `its mount namespace has not the hook's jar at ${this.jar} (a container)`;
  }
}
