#include "tls_probes.h"

#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "bpf_links.h"
#include "native_log.h"

namespace kreplay {

namespace {

// Where Debian and most distributions keep OpenSSL 3's libssl.
const char* kLibsslPaths[] = {"/usr/lib/x86_64-linux-gnu/libssl.so.3", "/usr/lib/aarch64-linux-gnu/libssl.so.3",
                              "/usr/lib64/libssl.so.3", "/usr/lib/libssl.so.3"};

const char* kSymbols[] = {"SSL_read", "SSL_read_ex", "SSL_write", "SSL_write_ex"};

// The SSL_read family's symbols the ELF file defines (in .symtab or .dynsym).
std::set<std::string> DefinedSymbols(const std::string& path) {
  std::set<std::string> found;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return found;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  Elf_Scn* scn = nullptr;
  while (elf && (scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || (shdr.sh_type != SHT_SYMTAB && shdr.sh_type != SHT_DYNSYM)) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    const size_t count = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
    for (size_t i = 0; data && i < count; i++) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF ||
          GELF_ST_TYPE(sym.st_info) != STT_FUNC) {
        continue;
      }
      const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
      if (!name || std::strncmp(name, "SSL_", 4) != 0) continue;
      for (const char* wanted : kSymbols) {
        if (std::strcmp(name, wanted) == 0) found.insert(wanted);
      }
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return found;
}

// The file's name for logs: /proc/<pid>/exe resolved to what the process ran.
std::string Named(const std::string& path) {
  char target[4096];
  const ssize_t n = path.compare(0, 6, "/proc/") == 0 ? readlink(path.c_str(), target, sizeof(target) - 1) : -1;
  return n > 0 ? std::string(target, static_cast<size_t>(n)) + " (" + path + ")" : path;
}

bool IsPid(const char* name) {
  for (const char* c = name; *c; c++) {
    if (*c < '0' || *c > '9') return false;
  }
  return *name != 0;
}

}  // namespace

bool TlsProbes::Owns(const bpf_program* prog) {
  const char* section = bpf_program__section_name(prog);
  return std::strcmp(section, "uprobe") == 0 || std::strcmp(section, "uretprobe") == 0;
}

void TlsProbes::Consider(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  if (!files_.insert({st.st_dev, st.st_ino}).second) return;
  const std::set<std::string> symbols = DefinedSymbols(path);
  if (symbols.count("SSL_read") && symbols.count("SSL_write") && Attach(path, symbols))
    binaries_.push_back(Named(path));
}

// Both ends of each read, the entry of each write; false (and nothing left attached) when one fails.
bool TlsProbes::Attach(const std::string& path, const std::set<std::string>& symbols) {
  struct Probe {
    const char* symbol;
    bpf_program* prog;
    bool ret;
  } probes[] = {
      {"SSL_read", programs_.read_enter, false},       {"SSL_read", programs_.read_exit, true},
      {"SSL_read_ex", programs_.read_ex_enter, false}, {"SSL_read_ex", programs_.read_ex_exit, true},
      {"SSL_write", programs_.write_enter, false},     {"SSL_write_ex", programs_.write_ex_enter, false},
  };
  const size_t before = links_.size();
  for (const Probe& probe : probes) {
    if (!symbols.count(probe.symbol)) continue;
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = probe.ret, .func_name = probe.symbol);
    bpf_link* link = bpf_program__attach_uprobe_opts(probe.prog, -1, path.c_str(), 0, &opts);
    if (!link) {
      const int err = errno;
      while (links_.size() > before) {
        bpf_link__destroy(links_.back());
        links_.pop_back();
      }
      AppendLog("warn", "TLS requests in " + Named(path) + " are not attributed: cannot probe " + probe.symbol + ": " +
                            std::strerror(err));
      return false;
    }
    links_.push_back(link);
  }
  AppendLog("info", "TLS plaintext is read from " + Named(path));
  return true;
}

void TlsProbes::Scan() {
  last_scan_ = std::chrono::steady_clock::now();
  for (const char* path : kLibsslPaths) Consider(path);
  DIR* proc = opendir("/proc");
  if (!proc) return;
  std::map<pid_t, ino_t> alive;
  while (dirent* entry = readdir(proc)) {
    if (!IsPid(entry->d_name)) continue;
    const pid_t pid = std::atoi(entry->d_name);
    const std::string dir = std::string("/proc/") + entry->d_name;
    struct stat exe;
    // kernel threads have no executable
    if (stat((dir + "/exe").c_str(), &exe) != 0) continue;
    alive[pid] = exe.st_ino;
    auto known = processes_.find(pid);
    if (known != processes_.end() && known->second == exe.st_ino) continue;
    Consider(dir + "/exe");
    // a libssl elsewhere than the usual paths (a container's, a vendored one), through the process's root
    std::ifstream maps(dir + "/maps");
    std::string line;
    while (std::getline(maps, line)) {
      const size_t slash = line.find('/');
      if (slash == std::string::npos || line.find("libssl.so", slash) == std::string::npos) continue;
      Consider(dir + "/root" + line.substr(slash));
    }
  }
  closedir(proc);
  processes_ = std::move(alive);
}

void TlsProbes::ScanIfDue() {
  if (std::chrono::steady_clock::now() - last_scan_ >= std::chrono::seconds(1)) Scan();
}

void TlsProbes::Detach() { DestroyLinks(links_); }

}  // namespace kreplay
