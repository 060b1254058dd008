/**
 * What /proc tells of a JVM before the agent attaches to it (jvm-hooks.ts): whether it opted out,
 * whether its options turn the attach mechanism or its SIGQUIT handler off, its pid in its own PID
 * namespace, and whether it handles SIGQUIT yet. Plain functions over the files' text.
 */

export const JVM_OPT_OUT_VARIABLE = 'KREPLAY_JVM_HOOK';

/** The environment variables the JVM's launcher reads options from, before its command line. */
const OPTION_VARIABLES = ['JAVA_TOOL_OPTIONS', 'JDK_JAVA_OPTIONS'];

/** KREPLAY_JVM_HOOK=off (any case) in the process's initial environment (/proc/<pid>/environ). */
export function jvmOptedOut(environ: string): boolean {
  const off = `${JVM_OPT_OUT_VARIABLE.toLowerCase()}=off`;
  return environ.split('\0').some((entry) => entry.toLowerCase() === off);
}

/** The JVM's options: those of JAVA_TOOL_OPTIONS and JDK_JAVA_OPTIONS, then its command line's (the last word wins). */
export function jvmOptions(cmdline: string, environ: string): string[] {
  const options: string[] = [];
  for (const entry of environ.split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0 && OPTION_VARIABLES.includes(entry.slice(0, eq)))
      options.push(
        ...entry
          .slice(eq + 1)
          .split(/\s+/)
          .filter(Boolean),
      );
  }
  return [...options, ...cmdline.split('\0').filter(Boolean)];
}

/**
 * Why the agent must not attach to a JVM with these options, or null: the attach mechanism turned
 * off (-XX:+DisableAttachMechanism: its owner's word), or SIGQUIT left to its default action (-Xrs,
 * -XX:+ReduceSignalUsage), which the attach handshake would make kill it.
 */
export function attachRefusal(options: string[]): string | null {
  const flag = (name: string): boolean | undefined => {
    let on: boolean | undefined;
    for (const option of options) {
      if (option === `-XX:+${name}`) on = true;
      else if (option === `-XX:-${name}`) on = false;
    }
    return on;
  };
  if (flag('DisableAttachMechanism')) return 'it disables the attach mechanism (-XX:+DisableAttachMechanism)';
  if (options.includes('-Xrs') || flag('ReduceSignalUsage'))
    return 'it leaves SIGQUIT to its default action (-Xrs or -XX:+ReduceSignalUsage): the attach handshake would end it';
  return null;
}

/** Its pid in its own PID namespace (the last of NSpid in /proc/<pid>/status): the attach files' names use it. */
export function namespacePid(status: string, pid: number): number {
  const m = /^NSpid:\s*([\d\s]+)$/m.exec(status);
  const pids = m ? m[1]!.trim().split(/\s+/).map(Number) : [];
  return pids.length ? pids[pids.length - 1]! : pid;
}

/** Whether it handles SIGQUIT (SigCgt in /proc/<pid>/status): a JVM still starting does not yet. */
export function catchesQuit(status: string): boolean {
  const m = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status);
  // SIGQUIT is signal 3: bit 2 of the mask
  return m ? (BigInt(`0x${m[1]}`) & 4n) !== 0n : false;
}

/** Its effective uid and gid (Uid: and Gid: in /proc/<pid>/status): the attach files' owner. */
export function effectiveIds(status: string): { uid: number; gid: number } | null {
  const uid = /^Uid:\s+\d+\s+(\d+)/m.exec(status);
  const gid = /^Gid:\s+\d+\s+(\d+)/m.exec(status);
  return uid && gid ? { uid: Number(uid[1]), gid: Number(gid[1]) } : null;
}
