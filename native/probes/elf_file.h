// An ELF file on disk as the probe finders read it: its symbols, sections,
// segments, and the bytes at an address. No kernel in here.
#pragma once

#include <gelf.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace kreplay {

struct ElfSymbol {
  std::string name;
  uint64_t value = 0;
  uint64_t size = 0;
  int type = 0;  // STT_*
};

class ElfFile {
 public:
  explicit ElfFile(const std::string& path);
  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  // Whether the file opened and is ELF.
  bool ok() const { return elf_ != nullptr; }
  // e_machine (EM_X86_64, ...), 0 when not ok.
  int machine() const;
  // ET_DYN (a shared object or a PIE): its addresses are relative to where it is loaded.
  bool relocatable() const;

  // The defined symbols of .symtab and .dynsym that `wanted` accepts, by name and STT_ type;
  // `dynamic_only`: .dynsym's alone (what the file exports, far smaller in a large program).
  std::vector<ElfSymbol> Symbols(const std::function<bool(const char* name, int type)>& wanted,
                                 bool dynamic_only = false) const;
  // What Symbols() returns for a filter on the name alone (the same symbols in the same order), without
  // reading every name: .dynsym through its hash table (.gnu.hash, else .hash) as the dynamic linker
  // looks a name up, and a table without one by comparing only the wanted names' bytes. A file this
  // cannot read so (not 64-bit little-endian, an odd entry size, a hash table that does not hold
  // together) is walked as Symbols() walks it.
  std::vector<ElfSymbol> SymbolsNamed(const std::set<std::string>& names, bool dynamic_only = false) const;
  bool HasSection(const char* name) const;
  // The section's bytes (empty when absent or without file contents).
  std::vector<uint8_t> SectionBytes(const char* name) const;
  // The first program header of `type` (PT_TLS, ...).
  bool Segment(uint32_t type, GElf_Phdr* out) const;
  // Where a virtual address of a loaded segment is in the file, or -1.
  int64_t FileOffset(uint64_t vaddr) const;
  // `size` bytes at a virtual address, read from the file; empty when not all of them are there.
  std::vector<uint8_t> Read(uint64_t vaddr, size_t size) const;

 private:
  int fd_ = -1;
  Elf* elf_ = nullptr;
};

}  // namespace kreplay
