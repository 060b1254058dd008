#include "go_binary.h"

#include <capstone/capstone.h>

#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "elf_file.h"

namespace kreplay {

namespace {

const char kNewproc1[] = "runtime.newproc1";
const char kTlsg[] = "runtime.tlsg";
const char kRoundTrip[] = "net/http.(*persistConn).roundTrip";
const char kReadLoop[] = "net/http.(*persistConn).readLoop";
const char kWriteLoop[] = "net/http.(*persistConn).writeLoop";
const char kWaitForContinue[] = "net/http.(*persistConn).waitForContinue";
const char kProcessHeaders[] = "net/http.(*http2serverConn).processHeaders";
const char kNewproc[] = "runtime.newproc";
const char kCasgstatus[] = "runtime.casgstatus";
const char kTlsRead[] = "crypto/tls.(*Conn).Read";
const char kTcpConnItab[] = "go.itab.*net.TCPConn,net.Conn";
const char kChansend[] = "runtime.chansend";
const char kChanrecv[] = "runtime.chanrecv";
const char kChanrecv1[] = "runtime.chanrecv1";
const char kChanrecv2[] = "runtime.chanrecv2";
// casgstatus(gp, oldval, newval)'s second and third arguments' registers (x86 numbering) and the statuses that
// make a new goroutine runnable (runtime2.go: _Gdead, _Grunnable, unchanged since Go 1.4)
const uint8_t kBx = 3, kCx = 1;
const int32_t kGdead = 6, kGrunnable = 1;
// Go's register ABI (arguments in AX, BX, ...; g in R14) on amd64 since 1.17
const int kRegisterAbiMinor = 17;

// The minor of "go1.N...", or -1.
int GoMinor(const std::string& version) {
  if (version.compare(0, 4, "go1.") != 0) return -1;
  int minor = 0;
  size_t i = 4;
  for (; i < version.size() && version[i] >= '0' && version[i] <= '9'; i++) minor = minor * 10 + (version[i] - '0');
  return i > 4 ? minor : -1;
}

// The function's instructions at `address`, decoded by a linear sweep; none when a byte of it does not decode
// (a sweep that stopped early may have misread everything after: none of it is trusted).
std::vector<cs_insn> Instructions(const std::vector<uint8_t>& code, uint64_t address) {
  std::vector<cs_insn> found;
  csh handle;
  if (code.empty() || cs_open(CS_ARCH_X86, CS_MODE_64, &handle) != CS_ERR_OK) return found;
  cs_insn* insn = cs_malloc(handle);
  const uint8_t* at = code.data();
  size_t left = code.size();
  while (cs_disasm_iter(handle, &at, &left, &address, insn)) found.push_back(*insn);
  cs_free(insn, 1);
  cs_close(&handle);
  if (left != 0) found.clear();
  return found;
}

// A function symbol's instructions (Instructions), decoded once for every site looked for in it.
std::vector<cs_insn> CodeOf(const ElfFile& elf, const ElfSymbol& f) {
  return Instructions(elf.Read(f.value, f.size), f.value);
}

// Where a direct CALL (E8 rel32) goes.
uint64_t CallTarget(const cs_insn& insn) {
  if (insn.id != X86_INS_CALL || insn.size != 5 || insn.bytes[0] != 0xe8) return 0;
  int32_t rel;
  std::memcpy(&rel, insn.bytes + 1, sizeof(rel));
  return insn.address + insn.size + static_cast<int64_t>(rel);
}

// Where runtime.tlsg is from the thread pointer: in an executable's TLS block
// (x86-64 puts it right below the thread pointer, aligned), or -8 where Go's
// own linker placed it without a symbol.
int64_t TlsOffset(const ElfFile& elf) {
  GElf_Phdr tls;
  const auto tlsg =
      elf.Symbols([](const char* name, int type) { return type == STT_TLS && !std::strcmp(name, kTlsg); });
  if (tlsg.empty() || !elf.Segment(PT_TLS, &tls)) return -8;
  const uint64_t align = tls.p_align ? tls.p_align : 1;
  const uint64_t block = (tls.p_memsz + align - 1) / align * align;
  return static_cast<int64_t>(tlsg.front().value) - static_cast<int64_t>(block);
}

// Whether writeLoop calls `callee` itself (not inlined): then it runs on the writeLoop's goroutine.
bool WriteLoopCalls(const ElfFile& elf, const std::map<std::string, ElfSymbol>& functions, const char* callee) {
  auto loop = functions.find(kWriteLoop);
  auto target = functions.find(callee);
  if (loop == functions.end() || target == functions.end()) return false;
  for (const cs_insn& insn : CodeOf(elf, loop->second)) {
    if (CallTarget(insn) == target->second.value) return true;
  }
  return false;
}

// The file offset of the function's one direct CALL to `target` (`code`: CodeOf(f); `at`: its entry's file offset), 0
// when there is not exactly one.
uint64_t CallSite(const std::vector<cs_insn>& code, const ElfSymbol& f, uint64_t target, uint64_t at) {
  uint64_t site = 0;
  int calls = 0;
  for (const cs_insn& insn : code) {
    if (CallTarget(insn) != target) continue;
    calls++;
    site = at + (insn.address - f.value);
  }
  return calls == 1 ? site : 0;
}

// From processHeaders' entry to the return address of its only CALL runtime.newproc (the stream handler's `go`
// statement: newproc1's callerpc); 0 when there is not exactly one.
uint64_t HandlerGo(const ElfFile& elf, const std::map<std::string, ElfSymbol>& functions) {
  auto headers = functions.find(kProcessHeaders);
  auto newproc = functions.find(kNewproc);
  if (headers == functions.end() || newproc == functions.end()) return 0;
  const uint64_t call = CallSite(CodeOf(elf, headers->second), headers->second, newproc->second.value, 0);
  // a direct CALL is 5 bytes (CallTarget)
  return call ? call + 5 : 0;
}

// The file offsets of the function's RET instructions (`code`: CodeOf(f); `at`: its entry's), none when it does
// not decode.
std::vector<uint64_t> Returns(const std::vector<cs_insn>& code, const ElfSymbol& f, uint64_t at) {
  std::vector<uint64_t> found;
  for (const cs_insn& insn : code) {
    if (insn.id == X86_INS_RET) found.push_back(insn.address - f.value + at);
  }
  return found;
}

// Where an entry uprobe goes (`at`: the entry's file offset): the conditional jump of Go's stack check
// (`[LEAQ -n(SP), R12;] CMPQ SP|R12, 16(R14); JBE morestack`), or the entry when there is none. The kernel emulates
// a jump, and single-steps the CMP or LEAQ at the entry out of line: a #DB trap per hit, which a virtual machine
// turns into an exit to its hypervisor (tens of µs; bench/RESULTS.md, issue 46). Neither instruction before the
// jump writes an argument register or R14 (g), so the probe reads what it would at the entry. A jump taken (the
// stack grows) comes back to the entry, and the probe runs again on the same arguments (the moved stack's
// pointers adjusted): its program must give the same result twice.
uint64_t EntrySite(const std::vector<cs_insn>& code, const ElfSymbol& f, uint64_t at) {
  for (size_t i = 0; i < code.size() && i < 3; i++) {
    const cs_insn& insn = code[i];
    if (insn.id == X86_INS_JBE) return at + (insn.address - f.value);
    // only the check's own instructions come before its jump
    if (insn.id != X86_INS_LEA && insn.id != X86_INS_CMP) break;
  }
  return at;
}

// Whether `insn` is `MOVL $value, reg` (B8+r imm32: how Go's assembler passes a small constant), `reg` 0-7.
bool SetsConstant(const cs_insn& insn, uint8_t reg, int32_t value) {
  if (insn.size != 5 || insn.bytes[0] != 0xb8 + reg) return false;
  int32_t imm;
  std::memcpy(&imm, insn.bytes + 1, sizeof(imm));
  return imm == value;
}

// Where a jump goes: a direct one's target (JMP or Jcc, rel8 or rel32), ~0 for an indirect one (anywhere), 0 for
// any other instruction.
uint64_t JumpTarget(const cs_insn& insn) {
  const uint8_t* b = insn.bytes;
  const uint64_t next = insn.address + insn.size;
  if (insn.size == 2 && (b[0] == 0xeb || (b[0] & 0xf0) == 0x70)) return next + static_cast<int8_t>(b[1]);
  int32_t rel;
  if (insn.size == 5 && b[0] == 0xe9) {
    std::memcpy(&rel, b + 1, sizeof(rel));
    return next + static_cast<int64_t>(rel);
  }
  if (insn.size == 6 && b[0] == 0x0f && (b[1] & 0xf0) == 0x80) {
    std::memcpy(&rel, b + 2, sizeof(rel));
    return next + static_cast<int64_t>(rel);
  }
  return insn.id == X86_INS_JMP || insn.id == X86_INS_LJMP ? ~uint64_t{0} : 0;
}

// The file offset of newproc1's one `CALL runtime.casgstatus` with BX = _Gdead (6) and CX = _Grunnable (1) set by
// the instructions right before it (NOPs aside), none of which a branch lands on or after (`code`: CodeOf(newproc1)
// `f`; `at`: its entry's file offset). Every goroutine newproc1 makes passes there before it can run; unlike a RET, a
// direct CALL is emulated by the kernel. 0 when there is not exactly one such call (Go 1.21 and later pass a variable
// status).
uint64_t RunnableSite(const std::vector<cs_insn>& code, const ElfSymbol& f,
                      const std::map<std::string, ElfSymbol>& functions, uint64_t at) {
  auto casgstatus = functions.find(kCasgstatus);
  if (casgstatus == functions.end()) return 0;
  std::set<uint64_t> targets;
  for (const cs_insn& insn : code) targets.insert(JumpTarget(insn));
  // a jump table's targets are not known
  if (targets.count(~uint64_t{0})) return 0;
  uint64_t site = 0;
  int calls = 0;
  for (size_t i = 0; i < code.size(); i++) {
    if (CallTarget(code[i]) != casgstatus->second.value) continue;
    bool dead = false, runnable = false;
    // back from the CALL to the two MOVs, over NOPs, no branch landing in between
    for (size_t j = i; j-- > 0 && !targets.count(code[j + 1].address) && !(dead && runnable);) {
      if (SetsConstant(code[j], kBx, kGdead)) {
        dead = true;
      } else if (SetsConstant(code[j], kCx, kGrunnable)) {
        runnable = true;
      } else if (code[j].id != X86_INS_NOP) {
        break;
      }
    }
    if (!dead || !runnable) continue;
    calls++;
    site = at + (code[i].address - f.value);
  }
  return calls == 1 ? site : 0;
}

}  // namespace

std::string GoBuildVersion(const std::vector<uint8_t>& buildinfo) {
  static const char kMagic[] = "\xff Go buildinf:";
  const size_t header = 32;
  // the version string follows the header inline (flag 2) from Go 1.18 on, as a uvarint length and bytes
  if (buildinfo.size() <= header || std::memcmp(buildinfo.data(), kMagic, sizeof(kMagic) - 1) != 0 ||
      !(buildinfo[15] & 2)) {
    return "";
  }
  uint64_t length = 0;
  size_t at = header;
  for (int shift = 0; at < buildinfo.size() && shift < 64; shift += 7) {
    const uint8_t byte = buildinfo[at++];
    length |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) break;
  }
  if (length > 64 || at + length > buildinfo.size()) return "";
  return std::string(reinterpret_cast<const char*>(buildinfo.data() + at), length);
}

GoBinary InspectGoBinary(const std::string& path) {
  GoBinary go;
  const ElfFile elf(path);
  if (!elf.ok() || (!elf.HasSection(".go.buildinfo") && !elf.HasSection(".note.go.buildid"))) return go;
  go.is_go = true;
  go.version = GoBuildVersion(elf.SectionBytes(".go.buildinfo"));
  const int minor = GoMinor(go.version);
  if (elf.machine() != EM_X86_64) {
    go.unfollowed = "goroutines are followed on x86-64 only";
    return go;
  }
  if (minor < kRegisterAbiMinor) {
    go.unfollowed = go.version.empty() ? "its Go version is not readable (Go 1.18 or newer is)"
                                       : go.version + " is older than Go 1.17's register ABI";
    return go;
  }
  if (!elf.HasSection(".symtab")) {
    go.unfollowed = "it is stripped (no symbol table: built with -ldflags=-s)";
    return go;
  }
  std::map<std::string, ElfSymbol> functions;
  for (const ElfSymbol& symbol : elf.Symbols([](const char*name, int type) {
         return (type == STT_FUNC &&
                 (!std::strcmp(name, kNewproc1) || !std::strcmp(name, kRoundTrip) || !std::strcmp(name, kReadLoop) ||
                  !std::strcmp(name, kWriteLoop) || !std::strcmp(name, kWaitForContinue) ||
                  !std::strcmp(name, kProcessHeaders) || !std::strcmp(name, kNewproc) ||
                  !std::strcmp(name, kCasgstatus) || !std::strcmp(name, kTlsRead) || !std::strcmp(name, kChansend) ||
                  !std::strcmp(name, kChanrecv) || !std::strcmp(name, kChanrecv1) || !std::strcmp(name, kChanrecv2))) ||
                (type == STT_OBJECT && !std::strcmp(name, kTcpConnItab));
       })) {
    functions[symbol.name] = symbol;
  }
  auto offset = [&](const char* name) -> uint64_t {
    auto found = functions.find(name);
    const int64_t at = found == functions.end() ? -1 : elf.FileOffset(found->second.value);
    return at < 0 ? 0 : static_cast<uint64_t>(at);
  };
  go.newproc1 = offset(kNewproc1);
  if (!go.newproc1 || !functions[kNewproc1].size) {
    go.unfollowed = std::string(kNewproc1) + " is not in its symbol table";
    return go;
  }
  const std::vector<cs_insn> newproc1 = CodeOf(elf, functions[kNewproc1]);
  go.newproc1_returns = Returns(newproc1, functions[kNewproc1], go.newproc1);
  if (go.newproc1_returns.empty()) {
    go.unfollowed = std::string("no RET instruction was found in ") + kNewproc1;
    return go;
  }
  go.newproc1_runnable = RunnableSite(newproc1, functions[kNewproc1], functions, go.newproc1);
  go.newproc1 = EntrySite(newproc1, functions[kNewproc1], go.newproc1);
  go.tls_offset = TlsOffset(elf);
  go.layout = ReadGoLayout(path);
  go.round_trip = offset(kRoundTrip);
  go.read_loop = offset(kReadLoop);
  go.conn_write = WriteLoopCalls(elf, functions, kWaitForContinue) ? offset(kWaitForContinue) : 0;
  // a pool's loops that no probe reaches would keep the request that dialed for good
  const int pool = !!go.round_trip + !!go.read_loop + !!go.conn_write;
  if (pool != 0 && pool != 3) go.unfollowed = "net/http's client pool is not all probed (inlined or missing)";
  // without it, a stream's handler takes its serve goroutine's context as any goroutine its creator's
  go.h2_handler_go = HandlerGo(elf, functions);
  go.h2_headers = go.h2_handler_go ? offset(kProcessHeaders) : 0;
  if (!go.h2_headers) go.h2_handler_go = 0;
  // without them, a TLS server's heads stay ciphertext to the kernel: its requests carry none
  go.tls_read = offset(kTlsRead);
  auto itab = functions.find(kTcpConnItab);
  if (go.tls_read && itab != functions.end())
    go.tls_read_returns = Returns(CodeOf(elf, functions[kTlsRead]), functions[kTlsRead], go.tls_read);
  if (go.tls_read_returns.empty()) {
    go.tls_read = 0;
  } else {
    go.tls_conn_itab = itab->second.value - functions[kTlsRead].value;
  }
  go.chansend = offset(kChansend);
  go.chanrecv = offset(kChanrecv);
  const std::vector<cs_insn> chanrecv =
      go.chansend && go.chanrecv ? CodeOf(elf, functions[kChanrecv]) : std::vector<cs_insn>{};
  if (go.chansend && go.chanrecv) go.chanrecv_returns = Returns(chanrecv, functions[kChanrecv], go.chanrecv);
  if (go.chanrecv_returns.empty()) go.chansend = go.chanrecv = 0;
  if (go.chansend) go.chansend = EntrySite(CodeOf(elf, functions[kChansend]), functions[kChansend], go.chansend);
  // the blocking receives' RETs and CALLs of chanrecv, or chanrecv's entry and RETs: every one the binary has (the
  // linker drops an unused one) must decode, with one call
  const uint64_t recv1 = offset(kChanrecv1), recv2 = offset(kChanrecv2);
  bool blocking = go.chanrecv && (recv1 || recv2);
  for (const auto& [name, at, returns] :
       {std::tuple{kChanrecv1, recv1, &go.chanrecv1_returns}, std::tuple{kChanrecv2, recv2, &go.chanrecv2_returns}}) {
    if (!blocking || !at) continue;
    const std::vector<cs_insn> code = CodeOf(elf, functions[name]);
    *returns = Returns(code, functions[name], at);
    const uint64_t call = CallSite(code, functions[name], functions[kChanrecv].value, at);
    if (returns->empty() || !call) blocking = false;
    go.chanrecv_calls.push_back(call);
  }
  if (!blocking) {
    go.chanrecv1_returns.clear();
    go.chanrecv2_returns.clear();
    go.chanrecv_calls.clear();
  }
  if (go.chanrecv) go.chanrecv = EntrySite(chanrecv, functions[kChanrecv], go.chanrecv);
  return go;
}

}  // namespace kreplay
