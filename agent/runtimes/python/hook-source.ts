/**
 * What the agent queues into a Python process: the hook's source (kreplay_python_hook.py, shipped
 * beside this module) run in a namespace of its own, with the layout of the unit signal taken from
 * the one owner of the record layouts, and guarded so that nothing it raises reaches the
 * interpreter's pending-call loop (which would turn it into a SystemError in the program).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONTEXT_DATA_LEN, UnitOp, UnitSignalLayout } from '../../../core/model';

/** What the hook signals with (its `SIGNAL` global). */
export interface PythonHookSignal {
  magic: string;
  /** offsets of the op and the unit in struct kr_unit_signal, and its size */
  opAt: number;
  unitAt: number;
  bytes: number;
  open: number;
  handoff: number;
  watch: number;
  close: number;
  adopt: number;
  /** the op that gives a thread running no unit a mailbox (KR_UNIT_MAILBOX) */
  mailboxOp: number;
  /** the most bytes of an OPEN's request head the kernel hands on */
  maxHead: number;
  /** the descriptor the signals are written to: KR_UNIT_SIGNAL_FD, which no file can have */
  fd: number;
  /** where, in a thread's WATCH signal's bytes, the mailbox keeps its signal's length and the signal */
  mailboxLengthAt: number;
  mailboxAt: number;
  /** signals through a thread's mailbox and getpriority (false: a seccomp filter might refuse that call) */
  mailbox: boolean;
}

export const PYTHON_HOOK_SIGNAL: PythonHookSignal = {
  magic: UnitSignalLayout.magic,
  opAt: UnitSignalLayout.op,
  unitAt: UnitSignalLayout.unit,
  bytes: UnitSignalLayout.bytes,
  open: UnitOp.Open,
  handoff: UnitOp.Handoff,
  watch: UnitOp.Watch,
  close: UnitOp.Close,
  adopt: UnitOp.Adopt,
  mailboxOp: UnitOp.Mailbox,
  maxHead: CONTEXT_DATA_LEN,
  fd: UnitSignalLayout.fd,
  mailboxLengthAt: UnitSignalLayout.mailboxLength,
  mailboxAt: UnitSignalLayout.mailbox,
  mailbox: true,
};

/** The hook's name: its namespace's __name__ is this with `_boot` (it registers nothing in sys.modules). */
export const PYTHON_HOOK_MODULE = '_kreplay_python_hook';

/** The hook's source: beside this module, in the checkout and in dist/ (the build copies it there). */
export function readPythonHookSource(): string {
  return readFileSync(join(__dirname, 'kreplay_python_hook.py'), 'utf8');
}

/**
 * The code PyRun_SimpleString runs. The source goes in as a string literal (JSON's escapes are
 * Python's for ASCII text, and the source is ASCII), so nothing is bound in the program's __main__.
 * A KeyboardInterrupt that lands while it runs is handed back to the program. `mailbox` false: the
 * hook writes every signal (a process under a seccomp filter).
 */
export function pythonBootstrap(source: string, mailbox = true): string {
  if (!/^[\x20-\x7e\n]*$/.test(source)) throw new Error('the Python hook source must be printable ASCII');
  const signal: PythonHookSignal = { ...PYTHON_HOOK_SIGNAL, mailbox };
  // a Python literal: its booleans as 1 and 0 (JSON's true is no Python name)
  const literal = JSON.stringify(signal, (_key, value: unknown) =>
    typeof value === 'boolean' ? Number(value) : value,
  );
  const globals = `{"__name__": "${PYTHON_HOOK_MODULE}_boot", "SIGNAL": ${literal}}`;
  return [
    'try:',
    `    exec(${JSON.stringify(source)}, ${globals})`,
    'except KeyboardInterrupt:',
    '    __import__("_thread").interrupt_main()',
    'except BaseException:',
    '    pass',
    '',
  ].join('\n');
}
