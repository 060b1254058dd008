/**
 * What the Node hook (hook.js) is evaluated with (and the JVM hook loaded with, agent/runtimes/jvm):
 * the layout of the unit signal it writes, from the one owner of the record layouts, and the
 * expression the inspector evaluates.
 */
import { CONTEXT_DATA_LEN, UnitOp, UnitSignalLayout } from '../../../core/model';
import kreplayNodeHook from './hook';

export interface HookSignal {
  magic: string;
  /** offsets of the op and the unit in struct kr_unit_signal, and its size */
  opAt: number;
  unitAt: number;
  bytes: number;
  open: number;
  /** the op that makes a signal's unit field the thread's unit slot */
  watch: number;
  /** the op that ends a unit's request (its response completed): what carries it loses it */
  close: number;
  /** the most bytes of an OPEN's request head the kernel hands on */
  maxHead: number;
  /** the descriptor the signals are written to: KR_UNIT_SIGNAL_FD, which no file can have */
  fd: number;
  /** where, in the WATCH signal's bytes, the mailbox keeps its signal's length and the signal */
  mailboxLengthAt: number;
  mailboxAt: number;
}

export const HOOK_SIGNAL: HookSignal = {
  magic: UnitSignalLayout.magic,
  opAt: UnitSignalLayout.op,
  unitAt: UnitSignalLayout.unit,
  bytes: UnitSignalLayout.bytes,
  open: UnitOp.Open,
  watch: UnitOp.Watch,
  close: UnitOp.Close,
  maxHead: CONTEXT_DATA_LEN,
  fd: UnitSignalLayout.fd,
  mailboxLengthAt: UnitSignalLayout.mailboxLength,
  mailboxAt: UnitSignalLayout.mailbox,
};

/** How the hook may signal in one process. */
export interface HookOptions {
  /** through the slot's mailbox and getpriority (false: a seccomp filter might refuse that call) */
  mailbox: boolean;
}

/** The hook's function text called with the signal layout: what Runtime.evaluate runs. */
export function hookExpression(options: HookOptions): string {
  return `(${kreplayNodeHook.toString()})(${JSON.stringify(HOOK_SIGNAL)}, ${JSON.stringify(options)})`;
}

/** What the hook returns when it installed itself in process `pid` (as that process sees its pid). */
export function hookInstalled(pid: number): string {
  return `kreplay-node-hook ${pid}`;
}
