#include "py_inject.h"

#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "elf_symbols.h"

namespace kreplay {

namespace {

std::string Errno(int err) { return std::strerror(err); }

[[noreturn]] void Fail(const char* code, const std::string& message) { throw PyInjectFailure(code, message); }

// ---- where the interpreter's functions are -------------------------------------------------------

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  std::string path;
};

// The file-backed mappings of offset 0 whose file looks like an interpreter (python3.X, libpython3.X.so).
std::vector<Mapping> InterpreterMappings(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  if (!maps) Fail("E_PY_INJECT_GONE", "process " + std::to_string(pid) + " has ended");
  std::vector<Mapping> found;
  std::string line;
  while (std::getline(maps, line)) {
    Mapping m;
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode;
    in >> range >> perms >> offset >> dev >> inode;
    std::getline(in >> std::ws, m.path);
    const size_t dash = range.find('-');
    if (dash == std::string::npos || m.path.empty() || m.path[0] != '/') continue;
    m.start = std::stoull(range.substr(0, dash), nullptr, 16);
    m.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    m.offset = std::stoull(offset, nullptr, 16);
    const std::string base = m.path.substr(m.path.rfind('/') + 1);
    if (m.offset != 0 || (base.rfind("python", 0) != 0 && base.rfind("libpython", 0) != 0)) continue;
    if (std::none_of(found.begin(), found.end(), [&](const Mapping& f) { return f.path == m.path; }))
      found.push_back(m);
  }
  return found;
}

// The 64-bit x86 ELF mapped at `m` that defines the functions the hook needs, read through
// /proc/<pid>/map_files (a file replaced or deleted since, or in another mount namespace, is the one
// the process runs). False when it defines none; throws E_PY_INJECT_PERM when it cannot be read.
bool ReadSymbols(pid_t pid, const Mapping& m, PythonSymbols* out) {
  char range[64];
  std::snprintf(range, sizeof(range), "%llx-%llx", static_cast<unsigned long long>(m.start),
                static_cast<unsigned long long>(m.end));
  std::string path = "/proc/" + std::to_string(pid) + "/map_files/" + range;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    path = "/proc/" + std::to_string(pid) + "/root" + m.path;
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0 && (errno == EACCES || errno == EPERM))
    Fail("E_PY_INJECT_PERM",
         "cannot read the interpreter " + m.path + " of process " + std::to_string(pid) + ": " + Errno(errno));
  if (fd < 0) return false;
  Elf64_Ehdr ehdr{};
  const bool x86_64 = pread(fd, &ehdr, sizeof(ehdr), 0) == static_cast<ssize_t>(sizeof(ehdr)) &&
                      ehdr.e_ident[EI_CLASS] == ELFCLASS64 && ehdr.e_machine == EM_X86_64;
  close(fd);
  if (!x86_64) return false;
  const ElfSymbols elf = ReadElfSymbols(path, {"Py_AddPendingCall", "PyRun_SimpleString", "_PyRuntime"}, true);
  const auto value = [&](const char* name) {
    const auto found = elf.values.find(name);
    return found == elf.values.end() ? 0 : found->second;
  };
  if (!value("Py_AddPendingCall") || !value("PyRun_SimpleString")) return false;
  // a shared object or a PIE lies where its first page (the first PT_LOAD, at 0 as linkers make them) is mapped
  const uint64_t base = elf.relocatable ? m.start : 0;
  out->file = m.path;
  out->add_pending_call = base + value("Py_AddPendingCall");
  out->run_simple_string = base + value("PyRun_SimpleString");
  out->runtime = value("_PyRuntime") ? base + value("_PyRuntime") : 0;
  return true;
}

// ---- driving the main thread ---------------------------------------------------------------------

#if defined(__x86_64__)

// -ERESTARTNOINTR: a call that stands at a stop with this result is made again when the thread resumes
constexpr long kRestartNoIntr = 513;
constexpr uint8_t kSyscallInsn[2] = {0x0f, 0x05};
// the call's own stack, unmapped once it returned: the thread's stack may end right below its sp
constexpr uint64_t kStackBytes = 64 * 1024;
// once the call runs, how much longer to let it finish when the deadline comes (see Injection::Call)
constexpr auto kCallGrace = std::chrono::seconds(1);

enum class StopKind { kSyscall, kInterrupt, kGroupStop, kSignal };

struct Stop {
  StopKind kind;
  int signal;
};

// One traced main thread; the destructor puts it back as it was (when a step failed) and detaches.
class Injection {
 public:
  Injection(pid_t pid, int timeout_ms)
      : pid_(pid), deadline_(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms)) {}

  ~Injection() {
    if (!attached_) {
      if (mem_ >= 0) close(mem_);
      return;
    }
    try {
      if (modified_) {
        Settle();
        SetRegs(saved_);
      } else if (!stopped_) {
        Settle();
      }
    } catch (const PyInjectFailure&) {
      // the thread is gone or does not stop: detaching is all that is left
    }
    ptrace(PTRACE_DETACH, pid_, nullptr, nullptr);
    if (mem_ >= 0) close(mem_);
  }

  int Run(const PythonSymbols& symbols, const std::string& code) {
    Attach();
    StopAtSystemCall();
    const uint64_t insn = saved_.rip - 2;
    const uint64_t code_bytes = (code.size() + 1 + 4095) & ~4095ULL;
    const uint64_t region = RunSyscall(insn, SYS_mmap, 0, kStackBytes + code_bytes, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, static_cast<uint64_t>(-1), 0);
    if (region > static_cast<uint64_t>(-4096))
      Fail("E_PY_INJECT_FAILED", "mmap in the target failed: " + Errno(-region));
    const uint64_t code_at = region + kStackBytes;
    WriteMemory(code_at, code.c_str(), code.size() + 1);
    const int result = Call(symbols.add_pending_call, symbols.run_simple_string, code_at, code_at);
    // the stack goes; the code stays until the interpreter has run it
    RunSyscall(insn, SYS_munmap, region, kStackBytes, 0, 0, 0, 0);
    Settle();
    SetRegs(saved_);
    modified_ = false;
    return result;
  }

 private:
  void Attach() {
    if (ptrace(PTRACE_SEIZE, pid_, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD)) != 0) {
      const int err = errno;
      if (err == ESRCH) Fail("E_PY_INJECT_GONE", "process " + std::to_string(pid_) + " has ended");
      Fail("E_PY_INJECT_PERM", "ptrace of process " + std::to_string(pid_) + " refused: " + Errno(err));
    }
    attached_ = true;
    mem_ = open(("/proc/" + std::to_string(pid_) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
    if (mem_ < 0)
      Fail("E_PY_INJECT_PERM", "cannot open the memory of process " + std::to_string(pid_) + ": " + Errno(errno));
    Check(ptrace(PTRACE_INTERRUPT, pid_, nullptr, nullptr), "PTRACE_INTERRUPT");
    Stop stop = Wait();
    while (stop.kind == StopKind::kSignal) stop = Resume(PTRACE_CONT, stop.signal);
    if (stop.kind == StopKind::kGroupStop)
      Fail("E_PY_INJECT_STATE", "process " + std::to_string(pid_) + " is stopped (job control)");
  }

  // Puts the thread at a system call, where it holds none of the interpreter's locks: the one it is
  // in (its registers are saved as they are), or else the next one it makes (skipped now, made again
  // when the thread is put back).
  void StopAtSystemCall() {
    GetRegs(&saved_);
    if (static_cast<int64_t>(saved_.orig_rax) >= 0 && AtSyscallInsn(saved_.rip)) return;
    Stop stop = ResumeUntil(PTRACE_SYSCALL, 0);
    if (stop.kind != StopKind::kSyscall) Fail("E_PY_INJECT_FAILED", "the main thread did not stop at a system call");
    GetRegs(&saved_);
    user_regs_struct skip = saved_;
    skip.orig_rax = static_cast<uint64_t>(-1);
    modified_ = true;
    SetRegs(skip);
    stop = ResumeUntil(PTRACE_SYSCALL, 0);
    if (stop.kind != StopKind::kSyscall) Fail("E_PY_INJECT_FAILED", "the skipped system call did not return");
    saved_.rax = static_cast<uint64_t>(-kRestartNoIntr);
    if (!AtSyscallInsn(saved_.rip)) Fail("E_PY_INJECT_FAILED", "no syscall instruction before the stop");
  }

  // Runs one system call in the thread from the `syscall` instruction at insn; its result.
  uint64_t RunSyscall(uint64_t insn, long nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                      uint64_t a5) {
    user_regs_struct regs = saved_;
    regs.rip = insn;
    regs.rax = static_cast<uint64_t>(nr);
    regs.orig_rax = static_cast<uint64_t>(-1);
    regs.rdi = a0;
    regs.rsi = a1;
    regs.rdx = a2;
    regs.r10 = a3;
    regs.r8 = a4;
    regs.r9 = a5;
    modified_ = true;
    SetRegs(regs);
    for (int edge = 0; edge < 2; edge++) {
      if (ResumeUntil(PTRACE_SYSCALL, 0).kind != StopKind::kSyscall)
        Fail("E_PY_INJECT_FAILED", "system call " + std::to_string(nr) + " in the target did not stop");
    }
    GetRegs(&regs);
    return regs.rax;
  }

  // Calls function(a0, a1) on the stack below `stack_top`, returning to address 0: the fault there
  // ends the call. Its int result.
  int Call(uint64_t function, uint64_t a0, uint64_t a1, uint64_t stack_top) {
    user_regs_struct regs = saved_;
    regs.rsp = (stack_top & ~15ULL) - 8;  // a return address (0: the page is fresh) where a call puts it
    regs.rip = function;
    regs.rdi = a0;
    regs.rsi = a1;
    regs.rax = 0;
    regs.orig_rax = static_cast<uint64_t>(-1);
    modified_ = true;
    SetRegs(regs);
    Stop stop;
    try {
      stop = ResumeUntil(PTRACE_CONT, SIGSEGV);
    } catch (const PyInjectFailure& failure) {
      // Past the deadline: a thread waiting for the pending-call lock holds nothing and may be put
      // back; one still running may hold it, and gets a little longer.
      if (failure.code() != "E_PY_INJECT_TIMEOUT" || WaitingInFutex()) throw;
      deadline_ = std::chrono::steady_clock::now() + kCallGrace;
      stop = ResumeUntil(PTRACE_CONT, SIGSEGV);
    }
    GetRegs(&regs);
    if (stop.kind != StopKind::kSignal || regs.rip != 0)
      Fail("E_PY_INJECT_FAILED", "the call of Py_AddPendingCall faulted (not the interpreter's symbols?)");
    return static_cast<int>(regs.rax);
  }

  // Stopped now (interrupted) in a futex wait.
  bool WaitingInFutex() {
    Settle();
    user_regs_struct regs;
    GetRegs(&regs);
    return regs.orig_rax == SYS_futex;
  }

  // Brings the thread to a stop inside signal handling (PTRACE_EVENT_STOP), where the registers of an
  // interrupted system call are put back and the call restarts as the kernel would restart it.
  void Settle() {
    if (stopped_ && last_.kind == StopKind::kInterrupt) return;
    Check(ptrace(PTRACE_INTERRUPT, pid_, nullptr, nullptr), "PTRACE_INTERRUPT");
    if (stopped_) {
      while (ResumeUntil(PTRACE_CONT, 0).kind != StopKind::kInterrupt) {
      }
      return;
    }
    for (Stop stop = Wait(); stop.kind != StopKind::kInterrupt;) stop = Resume(PTRACE_CONT, 0);
  }

  // Resumes with `request` until a stop other than a signal's; a signal other than `trap` is
  // delivered as it would have been (the program's handlers run), a job-control stop is passed over.
  Stop ResumeUntil(int request, int trap) {
    Stop stop = Resume(request, 0);
    while ((stop.kind == StopKind::kSignal && stop.signal != trap) || stop.kind == StopKind::kGroupStop)
      stop = Resume(request, stop.kind == StopKind::kSignal ? stop.signal : 0);
    return stop;
  }

  Stop Resume(int request, int signal) {
    Check(ptrace(static_cast<__ptrace_request>(request), pid_, nullptr, reinterpret_cast<void*>(signal)), "resume");
    stopped_ = false;
    return Wait();
  }

  Stop Wait() {
    for (auto nap = std::chrono::microseconds(20);; nap = std::min(nap * 2, std::chrono::microseconds(2000))) {
      int status = 0;
      const pid_t got = waitpid(pid_, &status, __WALL | WNOHANG);
      if (got == pid_ && (WIFEXITED(status) || WIFSIGNALED(status))) {
        attached_ = false;
        Fail("E_PY_INJECT_GONE", "process " + std::to_string(pid_) + " ended during the injection");
      }
      if (got == pid_ && WIFSTOPPED(status)) {
        stopped_ = true;
        const int signal = WSTOPSIG(status);
        if (signal == (SIGTRAP | 0x80))
          last_ = {StopKind::kSyscall, SIGTRAP};
        else if (status >> 16 == PTRACE_EVENT_STOP)
          last_ = {signal == SIGTRAP ? StopKind::kInterrupt : StopKind::kGroupStop, signal};
        else
          last_ = {StopKind::kSignal, signal};
        return last_;
      }
      if (got < 0 && errno != EINTR) {
        attached_ = false;
        Fail("E_PY_INJECT_GONE", "process " + std::to_string(pid_) + " cannot be waited for: " + Errno(errno));
      }
      if (std::chrono::steady_clock::now() >= deadline_)
        Fail("E_PY_INJECT_TIMEOUT", "the main thread of process " + std::to_string(pid_) + " did not stop in time");
      std::this_thread::sleep_for(nap);
    }
  }

  bool AtSyscallInsn(uint64_t rip) {
    uint8_t bytes[2];
    return rip >= 2 && pread(mem_, bytes, 2, static_cast<off_t>(rip - 2)) == 2 &&
           std::memcmp(bytes, kSyscallInsn, 2) == 0;
  }

  void WriteMemory(uint64_t at, const void* data, size_t len) {
    if (pwrite(mem_, data, len, static_cast<off_t>(at)) != static_cast<ssize_t>(len))
      Fail("E_PY_INJECT_FAILED", "cannot write the code into process " + std::to_string(pid_) + ": " + Errno(errno));
  }

  void GetRegs(user_regs_struct* regs) { Check(ptrace(PTRACE_GETREGS, pid_, nullptr, regs), "PTRACE_GETREGS"); }
  void SetRegs(const user_regs_struct& regs) {
    Check(ptrace(PTRACE_SETREGS, pid_, nullptr, const_cast<user_regs_struct*>(&regs)), "PTRACE_SETREGS");
  }

  void Check(long result, const char* what) {
    if (result == 0) return;
    const int err = errno;
    if (err == ESRCH) Fail("E_PY_INJECT_GONE", std::string(what) + ": process " + std::to_string(pid_) + " is gone");
    Fail("E_PY_INJECT_FAILED", std::string(what) + " failed: " + Errno(err));
  }

  pid_t pid_;
  std::chrono::steady_clock::time_point deadline_;
  int mem_ = -1;
  bool attached_ = false;
  bool stopped_ = false;
  // registers differ from saved_: they must be put back before the thread runs its own code
  bool modified_ = false;
  Stop last_ = {StopKind::kSignal, 0};
  user_regs_struct saved_{};

 public:
  Injection(const Injection&) = delete;
  Injection& operator=(const Injection&) = delete;
};

#endif

}  // namespace

PythonSymbols FindPythonSymbols(pid_t pid) {
  PythonSymbols symbols;
  for (const Mapping& m : InterpreterMappings(pid)) {
    if (ReadSymbols(pid, m, &symbols)) return symbols;
  }
  Fail("E_PY_INJECT_SYMBOLS", "process " + std::to_string(pid) + " maps no ELF that defines Py_AddPendingCall");
}

int QueuePythonCode(pid_t pid, const PythonSymbols& symbols, const std::string& code, int timeout_ms) {
#if defined(__x86_64__)
  Injection injection(pid, timeout_ms);
  return injection.Run(symbols, code);
#else
  (void)pid, (void)symbols, (void)code, (void)timeout_ms;
  Fail("E_PY_INJECT_STATE", "the Python hook is queued on x86-64 only");
#endif
}

namespace {

class QueueWorker : public Napi::AsyncWorker {
 public:
  QueueWorker(Napi::Env env, pid_t pid, PythonSymbols symbols, std::string code, int timeout_ms)
      : Napi::AsyncWorker(env),
        deferred_(Napi::Promise::Deferred::New(env)),
        pid_(pid),
        symbols_(std::move(symbols)),
        code_(std::move(code)),
        timeout_ms_(timeout_ms) {}

  Napi::Promise Promise() { return deferred_.Promise(); }

  // on a pool thread: ptrace's tracer is this thread from attach to detach
  void Execute() override {
    try {
      result_ = QueuePythonCode(pid_, symbols_, code_, timeout_ms_);
    } catch (const NativeFailure& failure) {
      error_code_ = failure.code();
      SetError(failure.what());
    } catch (const std::exception& e) {
      error_code_ = "E_PY_INJECT_FAILED";
      SetError(e.what());
    }
  }

  void OnOK() override { deferred_.Resolve(Napi::Number::New(Env(), result_)); }

  void OnError(const Napi::Error& error) override {
    Napi::Error coded = Napi::Error::New(Env(), error.Message());
    coded.Set("code", Napi::String::New(Env(), error_code_));
    deferred_.Reject(coded.Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  pid_t pid_;
  PythonSymbols symbols_;
  std::string code_;
  int timeout_ms_;
  int result_ = -1;
  std::string error_code_;
};

Napi::Error Coded(Napi::Env env, const NativeFailure& failure) {
  Napi::Error error = Napi::Error::New(env, failure.what());
  error.Set("code", Napi::String::New(env, failure.code()));
  return error;
}

pid_t PidArgument(const Napi::CallbackInfo& info, const char* usage) {
  if (info.Length() < 1 || !info[0].IsNumber() || info[0].As<Napi::Number>().Int64Value() < 1 ||
      info[0].As<Napi::Number>().Int64Value() > 4194304)
    throw Napi::TypeError::New(info.Env(), usage);
  return static_cast<pid_t>(info[0].As<Napi::Number>().Int32Value());
}

uint64_t Address(Napi::Env env, Napi::Object symbols, const char* name) {
  Napi::Value value = symbols.Get(name);
  bool lossless = false;
  const uint64_t address = value.IsBigInt() ? value.As<Napi::BigInt>().Uint64Value(&lossless) : 0;
  if (!lossless || !address)
    throw Napi::TypeError::New(env, std::string("symbols.") + name + " must be a BigInt address");
  return address;
}

// pythonSymbols(pid) -> {file, addPendingCall, runSimpleString, runtime}
Napi::Value PythonSymbolsJs(const Napi::CallbackInfo& info) {
  const pid_t pid = PidArgument(info, "pythonSymbols(pid) takes a process id");
  try {
    const PythonSymbols symbols = FindPythonSymbols(pid);
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("file", symbols.file);
    out.Set("addPendingCall", Napi::BigInt::New(info.Env(), symbols.add_pending_call));
    out.Set("runSimpleString", Napi::BigInt::New(info.Env(), symbols.run_simple_string));
    out.Set("runtime", Napi::BigInt::New(info.Env(), symbols.runtime));
    return out;
  } catch (const NativeFailure& failure) {
    throw Coded(info.Env(), failure);
  }
}

// queuePythonCode(pid, symbols, code, timeoutMs) -> Promise<what Py_AddPendingCall returned>
Napi::Value QueuePythonCodeJs(const Napi::CallbackInfo& info) {
  const char* usage = "queuePythonCode(pid, symbols, code, timeoutMs) takes a pid, symbols, a string and a number";
  const pid_t pid = PidArgument(info, usage);
  if (info.Length() != 4 || !info[1].IsObject() || !info[2].IsString() || !info[3].IsNumber())
    throw Napi::TypeError::New(info.Env(), usage);
  Napi::Object given = info[1].As<Napi::Object>();
  PythonSymbols symbols;
  symbols.add_pending_call = Address(info.Env(), given, "addPendingCall");
  symbols.run_simple_string = Address(info.Env(), given, "runSimpleString");
  const std::string code = info[2].As<Napi::String>().Utf8Value();
  if (code.find('\0') != std::string::npos) throw Napi::TypeError::New(info.Env(), "the code must hold no NUL");
  auto* worker = new QueueWorker(info.Env(), pid, symbols, code, info[3].As<Napi::Number>().Int32Value());
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace

void ExportPyInject(Napi::Env env, Napi::Object exports) {
  exports.Set("pythonSymbols", Napi::Function::New(env, PythonSymbolsJs));
  exports.Set("queuePythonCode", Napi::Function::New(env, QueuePythonCodeJs));
}

}  // namespace kreplay
