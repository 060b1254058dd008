/** What the agent reads of a process before it queues the Python hook (agent/runtimes/python/python-process.ts). */
import {
  interpreterState,
  isKreplayCommand,
  optedOut,
  pythonVersion,
  RUNTIME_BYTES,
  runtimeLayout,
  tracerPid,
} from '../../agent/runtimes/python/python-process';

describe('python-process', () => {
  it('tells the CPython version from the executable, or from the libpython it maps', () => {
    expect(pythonVersion('/usr/bin/python3.11')).toEqual({ major: 3, minor: 11 });
    expect(pythonVersion('/root/.pyenv/versions/3.12.1/bin/python3.12 (deleted)')).toEqual({
      major: 3,
      minor: 12,
    });
    const maps = '7f00-7f10 r-xp 00000000 08:01 42 /opt/py/lib/libpython3.13.so.1.0\n';
    expect(pythonVersion('/opt/py/bin/python', maps)).toEqual({ major: 3, minor: 13 });
    expect(pythonVersion('/opt/py/bin/python', '')).toBeNull();
    // a program that embeds the interpreter (uwsgi's python plugin) runs it too
    expect(pythonVersion('/usr/bin/uwsgi-core', maps)).toEqual({ major: 3, minor: 13 });
    expect(pythonVersion('/usr/sbin/uwsgi')).toBeNull();
  });

  it('reads the opt-out and the tracer, and tells kreplay by its command line', () => {
    expect(optedOut('PATH=/usr/bin\0KREPLAY_PYTHON_HOOK=off\0')).toBe(true);
    expect(optedOut('PATH=/usr/bin\0kreplay_python_hook=OFF\0')).toBe(true);
    expect(optedOut('PATH=/usr/bin\0KREPLAY_PYTHON_HOOK=on\0X=KREPLAY_PYTHON_HOOK=off')).toBe(false);
    expect(tracerPid('Name:\tpython3\nTracerPid:\t4242\nUid:\t0\n')).toBe(4242);
    expect(tracerPid('Name:\tpython3\nTracerPid:\t0\n')).toBe(0);
    expect(isKreplayCommand('/usr/lib/kreplay/node\0/usr/lib/kreplay/bin/kreplay.js\0run\0--txn\0x\0')).toBe(
      true,
    );
    expect(isKreplayCommand('/usr/bin/python3\0app.py\0')).toBe(false);
  });

  it("knows where 3.11 to 3.13 say that the interpreter is up, and no other version's layout", () => {
    expect(runtimeLayout({ major: 3, minor: 10 })).toBeNull();
    expect(runtimeLayout({ major: 3, minor: 14 })).toBeNull();
    const fixed = runtimeLayout({ major: 3, minor: 11 })!;
    expect(runtimeLayout({ major: 3, minor: 12 })).toEqual(fixed);
    const runtime = Buffer.alloc(RUNTIME_BYTES);
    expect(interpreterState(fixed, runtime)).toBe('starting');
    runtime.writeInt32LE(1, 16);
    expect(interpreterState(fixed, runtime)).toBe('ready');
    runtime.writeBigUInt64LE(0x7f0000001000n, 24);
    expect(interpreterState(fixed, runtime)).toBe('finalizing');
  });

  it("reads 3.13's _Py_DebugOffsets for where _finalizing lies, and refuses a free-threaded build", () => {
    const layout = runtimeLayout({ major: 3, minor: 13 })!;
    const runtime = Buffer.alloc(RUNTIME_BYTES);
    expect(interpreterState(layout, runtime)).toBe('unknown');
    runtime.write('xdebugpy', 0, 'latin1');
    runtime.writeBigUInt64LE(0x30d00f0n, 8);
    runtime.writeBigUInt64LE(1048n, 32); // offsetof(_PyRuntimeState, _finalizing)
    expect(interpreterState(layout, runtime)).toBe('starting');
    runtime.writeInt32LE(1, 1040);
    expect(interpreterState(layout, runtime)).toBe('ready');
    runtime.writeBigUInt64LE(1n, 16); // free_threaded
    expect(interpreterState(layout, runtime)).toBe('unknown');
    runtime.writeBigUInt64LE(0n, 16);
    runtime.writeBigUInt64LE(BigInt(RUNTIME_BYTES), 32);
    expect(interpreterState(layout, runtime)).toBe('unknown');
  });
});
