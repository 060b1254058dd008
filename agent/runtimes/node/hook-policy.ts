/**
 * Which Node processes the hook may go into, decided from what /proc says before anything is sent
 * (docs/operate.md "The Node hook"): not one that opted out, not kreplay's own, not one whose
 * inspector is its user's or would open beyond loopback, not one SIGUSR1 would end. One in another
 * network namespace (a container's) is reached there (inspector-door.ts). Plain functions: the
 * answer is a reason to refuse, or null.
 */
import type { ProcessFacts } from './node-process';

/** The variable a process sets to keep the hook out (also what the test runner sets). */
export const OPT_OUT_VARIABLE = 'KREPLAY_NODE_HOOK';
const OPTED_OUT = new Set(['off', '0', 'false', 'no']);

/** Node's options that take the next argument as their value when not written with `=`. */
const VALUED = new Set([
  '-r',
  '--require',
  '--import',
  '--loader',
  '--experimental-loader',
  '--inspect-port',
  '--debug-port',
  '--title',
  '--conditions',
  '-C',
  '--env-file',
  '--input-type',
]);
const EVAL = new Set(['-e', '--eval', '-p', '--print']);
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/** Node's own options: those before the script on the command line, then NODE_OPTIONS. */
export function nodeOptions(argv: string[], nodeOptionsVariable = ''): string[] {
  const out: string[] = [];
  for (let i = 1; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('-') || arg === '-' || arg === '--') break;
    out.push(arg);
    if (EVAL.has(arg)) break;
    if (VALUED.has(arg) && i + 1 < argv.length) out.push(argv[++i]!);
  }
  return [...out, ...nodeOptionsVariable.split(/\s+/).filter(Boolean)];
}

/** The host of a `[host:]port` value; 127.0.0.1 when only a port is given. */
function hostOf(value: string): string {
  const colon = value.lastIndexOf(':');
  if (colon < 0) return /^\d+$/.test(value) ? '127.0.0.1' : value;
  return value.slice(0, colon);
}

/** Where SIGUSR1 opens the inspector when no option says otherwise. */
export const DEFAULT_INSPECTOR_PORT = 9229;

/**
 * The port SIGUSR1 opens the inspector on, from its options (the command line's first, which
 * wins over NODE_OPTIONS'); 0 for a random one, NaN when the value is no port.
 */
export function inspectorPort(options: string[]): number {
  for (let i = 0; i < options.length; i++) {
    const [flag, inline] = options[i]!.split(/=(.*)/s) as [string, string | undefined];
    if (flag !== '--inspect-port' && flag !== '--debug-port') continue;
    const value = inline ?? options[i + 1] ?? '';
    const port = value.slice(value.lastIndexOf(':') + 1);
    return /^\d{1,5}$/.test(port) && Number(port) <= 65535 ? Number(port) : NaN;
  }
  return DEFAULT_INSPECTOR_PORT;
}

/** Why the inspector must not be opened from its options, or null. */
function inspectorRefusal(options: string[]): string | null {
  for (let i = 0; i < options.length; i++) {
    const [flag, inline] = options[i]!.split(/=(.*)/s) as [string, string | undefined];
    if (/^--(inspect|inspect-brk|inspect-wait|debug|debug-brk)$/.test(flag))
      return `its inspector is open already (${flag}): it is its user's`;
    if (flag === '--disable-sigusr1') return 'SIGUSR1 is disabled (--disable-sigusr1)';
    if (flag === '--inspect-port' || flag === '--debug-port') {
      const value = inline ?? options[i + 1] ?? '';
      const host = hostOf(value);
      if (!LOOPBACK_HOSTS.has(host))
        return `SIGUSR1 would open its inspector on ${host}, beyond loopback (${flag})`;
    }
  }
  const port = inspectorPort(options);
  if (!(port > 0))
    return 'SIGUSR1 would open its inspector on a port the agent cannot guard beforehand (--inspect-port: random or invalid)';
  return null;
}

/** Whether the command line runs kreplay itself (its agent, daemon or CLI). */
export function isKreplay(argv: string[]): boolean {
  return argv.some((arg) => /(^|\/)(bin\/kreplay\.js|dist\/cli\/main\.js)$/.test(arg));
}

/**
 * Why the hook must stay out of this Node process, or null when it may go in. `transient`: the
 * process may change its mind (Node installs its SIGUSR1 handler some milliseconds after exec).
 */
export function hookRefusal(facts: ProcessFacts): { reason: string; transient: boolean } | null {
  const setting = facts.env.KREPLAY_NODE_HOOK;
  if (setting !== undefined && OPTED_OUT.has(setting.toLowerCase()))
    return { reason: `opted out (${OPT_OUT_VARIABLE}=${setting})`, transient: false };
  if (isKreplay(facts.argv)) return { reason: "kreplay's own process", transient: false };
  const inspector = inspectorRefusal(nodeOptions(facts.argv, facts.env.NODE_OPTIONS));
  if (inspector) return { reason: inspector, transient: false };
  if (!facts.sigusr1Caught)
    return { reason: 'SIGUSR1 is not caught: it would end the process', transient: true };
  return null;
}
