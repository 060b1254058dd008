/**
 * What the JVM injector reads of a process and says to it, without a JVM (agent/runtimes/jvm):
 * the options that refuse an attach, the namespace pid and SIGQUIT handling from /proc status, the
 * attach protocol's bytes and answers, the hook's arguments and the jar's ownership rule.
 */
import { UnitOp, UnitSignalLayout } from '../../core/model';
import { attachCommand, loadFailure } from '../../agent/runtimes/jvm/hotspot-attach';
import { jvmHookArgs, unsafeJar } from '../../agent/runtimes/jvm/jvm-hooks';
import {
  attachRefusal,
  catchesQuit,
  effectiveIds,
  jvmOptedOut,
  jvmOptions,
  namespacePid,
} from '../../agent/runtimes/jvm/jvm-process';

const env = (...entries: string[]) => entries.join('\0') + '\0';

describe('a JVM as /proc shows it', () => {
  it('opts out with KREPLAY_JVM_HOOK=off, in any case, and only so', () => {
    expect(jvmOptedOut(env('PATH=/bin', 'KREPLAY_JVM_HOOK=OFF'))).toBe(true);
    expect(jvmOptedOut(env('KREPLAY_JVM_HOOK=on'))).toBe(false);
    expect(jvmOptedOut(env('XKREPLAY_JVM_HOOK=off'))).toBe(false);
  });

  it('refuses attach disabled on the command line or in JAVA_TOOL_OPTIONS / JDK_JAVA_OPTIONS; the last word wins', () => {
    const refusal = (cmdline: string[], ...environ: string[]) =>
      attachRefusal(jvmOptions(cmdline.join('\0'), env(...environ)));
    expect(refusal(['java', '-XX:+DisableAttachMechanism', '-jar', 'a.jar'])).toMatch(
      /DisableAttachMechanism/,
    );
    expect(refusal(['java', 'Main'], 'JAVA_TOOL_OPTIONS=-Xmx1g -XX:+DisableAttachMechanism')).toMatch(
      /DisableAttachMechanism/,
    );
    expect(refusal(['java', 'Main'], 'JDK_JAVA_OPTIONS=-XX:+DisableAttachMechanism')).toMatch(
      /DisableAttachMechanism/,
    );
    expect(
      refusal(
        ['java', '-XX:-DisableAttachMechanism', 'Main'],
        'JAVA_TOOL_OPTIONS=-XX:+DisableAttachMechanism',
      ),
    ).toBeNull();
    expect(refusal(['java', '-Xrs', 'Main'])).toMatch(/SIGQUIT/);
    expect(refusal(['java', '-XX:+ReduceSignalUsage', 'Main'])).toMatch(/SIGQUIT/);
    expect(refusal(['java', '-jar', 'app.jar'], 'OTHER=-XX:+DisableAttachMechanism')).toBeNull();
  });

  it('reads its pid in its namespace, its effective ids and whether it handles SIGQUIT', () => {
    const status =
      'Name:\tjava\nUid:\t0\t1000\t1000\t1000\nGid:\t5\t1001\t1001\t1001\nNSpid:\t4242\t7\nSigCgt:\t0000000181005ccf\n';
    expect(namespacePid(status, 4242)).toBe(7);
    expect(namespacePid('Name:\tjava\n', 4242)).toBe(4242);
    expect(effectiveIds(status)).toEqual({ uid: 1000, gid: 1001 });
    expect(catchesQuit(status)).toBe(true);
    // a JVM still starting: SIGQUIT not caught yet (the attach would kill it)
    expect(catchesQuit('SigCgt:\t0000000000000000\n')).toBe(false);
    expect(catchesQuit('SigCgt:\t0000000000000003\n')).toBe(false);
  });
});

describe('the attach protocol', () => {
  it('sends protocol 1: the command and three arguments, each NUL-terminated', () => {
    expect(attachCommand('load', ['instrument', 'false', '/x.jar=a=1']).toString()).toBe(
      '1\0load\0instrument\0false\0/x.jar=a=1\0',
    );
    expect(attachCommand('properties', []).toString()).toBe('1\0properties\0\0\0\0');
    expect(() => attachCommand('load', ['a\0b'])).toThrow(/NUL/);
  });

  it('reads a load answer: loaded, or why not', () => {
    expect(loadFailure('0\n0\n')).toBeNull();
    expect(loadFailure('0\nreturn code: 0\n')).toBeNull();
    expect(loadFailure('0\nreturn code: 102\n')).toBe('the JVM could not load the hook: return code: 102');
    expect(loadFailure('101\n')).toMatch(/refused the command: 101/);
    expect(loadFailure('')).toMatch(/no answer/);
  });
});

describe('the hook jar and its arguments', () => {
  it('passes the unit signal layout from the one owner of the record layouts', () => {
    const args = Object.fromEntries(
      jvmHookArgs()
        .split(',')
        .map((pair) => pair.split('=')),
    );
    expect(args).toMatchObject({
      magic: UnitSignalLayout.magic,
      unitAt: String(UnitSignalLayout.unit),
      open: String(UnitOp.Open),
      watch: String(UnitOp.Watch),
      close: String(UnitOp.Close),
      fd: String(UnitSignalLayout.fd),
    });
  });

  it('loads only a jar that root owns, that no other user can change, and every user can read', () => {
    const tree: Record<string, { uid: number; mode: number }> = {
      '/': { uid: 0, mode: 0o40755 },
      '/usr': { uid: 0, mode: 0o40755 },
      '/usr/hook.jar': { uid: 0, mode: 0o100644 },
      '/tmp': { uid: 0, mode: 0o41777 },
      '/tmp/hook.jar': { uid: 0, mode: 0o100644 },
      '/home': { uid: 1000, mode: 0o40755 },
      '/home/hook.jar': { uid: 0, mode: 0o100644 },
      '/usr/private.jar': { uid: 0, mode: 0o100600 },
      '/usr/open.jar': { uid: 0, mode: 0o100666 },
    };
    const stat = (p: string) => {
      const st = tree[p];
      if (!st) throw new Error('ENOENT');
      return st;
    };
    expect(unsafeJar('/usr/hook.jar', stat)).toBeNull();
    expect(unsafeJar('/tmp/hook.jar', stat)).toMatch(/^\/tmp is not root's or is writable by others/);
    expect(unsafeJar('/home/hook.jar', stat)).toMatch(/^\/home is not root's/);
    expect(unsafeJar('/usr/private.jar', stat)).toMatch(/not readable by other users/);
    expect(unsafeJar('/usr/open.jar', stat)).toMatch(/writable by others/);
    expect(unsafeJar('/usr/none.jar', stat)).toMatch(/missing/);
  });
});
