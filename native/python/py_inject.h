// Queues Python source into a running CPython's main thread from outside, without changing its code
// or command line: kreplay's Python hook (agent/runtimes/python/). The interpreter runs it itself,
// with the GIL held, at its next pending-call check (Py_AddPendingCall(PyRun_SimpleString, code));
// this side only stops the main thread at a system call, maps a page for the code and calls
// Py_AddPendingCall on it, then puts the thread back as it was (an interrupted call restarts).
#pragma once

#include <napi.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "native_error.h"

namespace kreplay {

// A failure with one of the codes core/error-codes.ts names: E_PY_INJECT_PERM (ptrace refused),
// E_PY_INJECT_GONE (the process or its main thread ended), E_PY_INJECT_SYMBOLS (no interpreter
// symbols), E_PY_INJECT_TIMEOUT (no safe point, or no answer, before the deadline), E_PY_INJECT_STATE
// (stopped by job control, or an architecture this code does not drive), E_PY_INJECT_FAILED (a step in
// the target failed: the thread is put back and the code is not queued).
class PyInjectFailure : public NativeFailure {
 public:
  using NativeFailure::NativeFailure;
};

// Where a process's interpreter has what the hook needs: absolute addresses in that process.
struct PythonSymbols {
  std::string file;  // the ELF that defines them, as the process maps it (python3.X or libpython3.X.so)
  uint64_t add_pending_call = 0;
  uint64_t run_simple_string = 0;
  uint64_t runtime = 0;  // _PyRuntime, 0 when not exported
};

// Reads /proc/<pid>/maps and the .dynsym (or .symtab) of the interpreter's ELF; throws E_PY_INJECT_SYMBOLS
// when no mapped file defines Py_AddPendingCall and PyRun_SimpleString, E_PY_INJECT_GONE when the
// process has ended.
PythonSymbols FindPythonSymbols(pid_t pid);

// Makes the main thread of `pid` call Py_AddPendingCall(PyRun_SimpleString, code) and returns what it
// returned (0: queued). `code` stays mapped in the process (the interpreter reads it later). Every wait
// has the deadline; a refused or failed step leaves the thread as it was.
int QueuePythonCode(pid_t pid, const PythonSymbols& symbols, const std::string& code, int timeout_ms);

// pythonSymbols(pid) and queuePythonCode(pid, symbols, code, timeoutMs) (a Promise: the injection
// waits on the target, so it runs on a pool thread).
void ExportPyInject(Napi::Env env, Napi::Object exports);

}  // namespace kreplay
