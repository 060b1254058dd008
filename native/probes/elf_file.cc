#include "elf_file.h"

#include <fcntl.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace kreplay {

ElfFile::ElfFile(const std::string& path) {
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return;
  elf_version(EV_CURRENT);
  elf_ = elf_begin(fd_, ELF_C_READ_MMAP, nullptr);
  if (elf_ && elf_kind(elf_) != ELF_K_ELF) {
    elf_end(elf_);
    elf_ = nullptr;
  }
}

ElfFile::~ElfFile() {
  if (elf_) elf_end(elf_);
  if (fd_ >= 0) close(fd_);
}

int ElfFile::machine() const {
  GElf_Ehdr header;
  return elf_ && gelf_getehdr(elf_, &header) ? header.e_machine : 0;
}

bool ElfFile::relocatable() const {
  GElf_Ehdr header;
  return elf_ && gelf_getehdr(elf_, &header) && header.e_type == ET_DYN;
}

namespace {

// Whether Symbols() reads this section: .dynsym, and .symtab unless `dynamic_only`.
bool ReadsTable(const GElf_Shdr& shdr, bool dynamic_only) {
  return shdr.sh_type == SHT_DYNSYM || (!dynamic_only && shdr.sh_type == SHT_SYMTAB);
}

// One symbol table walked through libelf: each defined symbol's name read and `wanted` asked.
void Walk(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, const std::function<bool(const char*, int)>& wanted,
          std::vector<ElfSymbol>* found) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  const size_t count = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
  for (size_t i = 0; data && i < count; i++) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF) continue;
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    const int type = GELF_ST_TYPE(sym.st_info);
    if (name && wanted(name, type)) found->push_back({name, sym.st_value, sym.st_size, type});
  }
}

// A section's bytes as the file holds them (libelf's map of the file: nothing converted or copied).
struct Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

Bytes RawSection(Elf_Scn* scn) {
  Elf_Data* data = scn ? elf_rawdata(scn, nullptr) : nullptr;
  if (!data || !data->d_buf) return {};
  return {static_cast<const uint8_t*>(data->d_buf), data->d_size};
}

// The value at byte `at` of `bytes`, when all of it is inside: every read of a hash table goes
// through here, so a table pointing outside its section reads nothing.
template <typename T>
bool ReadAt(Bytes bytes, uint64_t at, T* out) {
  if (at > bytes.size || bytes.size - at < sizeof(T)) return false;
  std::memcpy(out, bytes.data + at, sizeof(T));
  return true;
}

// A 64-bit little-endian symbol table and its string table, read in place.
struct SymbolTable {
  Bytes symbols;
  Bytes strings;
  size_t count = 0;

  Elf64_Sym At(size_t i) const {
    Elf64_Sym sym;
    std::memcpy(&sym, symbols.data + i * sizeof sym, sizeof sym);
    return sym;
  }
  // Whether symbol i is defined and named `name`: its bytes and their NUL inside the string table,
  // where elf_strptr would find them.
  bool Defines(size_t i, const std::string& name) const {
    const Elf64_Sym sym = At(i);
    if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strings.size || strings.size - sym.st_name <= name.size())
      return false;
    const uint8_t* at = strings.data + sym.st_name;
    return at[name.size()] == '\0' && std::memcmp(at, name.data(), name.size()) == 0;
  }
};

using Matches = std::vector<std::pair<size_t, const std::string*>>;  // symbol index, its name

uint32_t GnuHash(const std::string& name) {
  uint32_t h = 5381;
  for (const unsigned char c : name) h = h * 33 + c;
  return h;
}

uint32_t SysvHash(const std::string& name) {
  uint32_t h = 0;
  for (const unsigned char c : name) {
    h = (h << 4) + c;
    const uint32_t high = h & 0xf0000000;
    if (high) h ^= high >> 24;
    h &= ~high;
  }
  return h;
}

// The defined symbols named `name` through a .gnu.hash table: those under its first hashed index
// compared one by one (the linker leaves undefined ones there), the rest by the Bloom filter and the
// name's chain, followed to its end (a name may be defined more than once: versions). False when
// the table does not hold together: the caller walks instead.
bool GnuLookup(const SymbolTable& table, Bytes hash, const std::string& name, Matches* found) {
  uint32_t buckets, first, blooms, shift;
  if (!ReadAt(hash, 0, &buckets) || !ReadAt(hash, 4, &first) || !ReadAt(hash, 8, &blooms) ||
      !ReadAt(hash, 12, &shift) || buckets == 0 || blooms == 0 || shift >= 32 || first > table.count)
    return false;
  // the header's counts must fit the section before any of it is believed
  const uint64_t buckets_at = 16 + uint64_t{blooms} * 8, chain_at = buckets_at + uint64_t{buckets} * 4;
  if (chain_at > hash.size) return false;
  for (size_t i = 0; i < first; i++)
    if (table.Defines(i, name)) found->emplace_back(i, &name);
  const uint32_t h = GnuHash(name);
  uint64_t bloom;
  uint32_t start;
  if (!ReadAt(hash, 16 + uint64_t{h / 64 % blooms} * 8, &bloom) ||
      !ReadAt(hash, buckets_at + uint64_t{h % buckets} * 4, &start))
    return false;
  const uint64_t bits = (uint64_t{1} << (h % 64)) | (uint64_t{1} << ((h >> shift) % 64));
  if ((bloom & bits) != bits || start == 0) return true;
  if (start < first) return false;
  for (uint64_t i = start;; i++) {
    uint32_t link;
    if (i >= table.count || !ReadAt(hash, chain_at + (i - first) * 4, &link)) return false;
    if ((link | 1) == (h | 1) && table.Defines(i, name)) found->emplace_back(i, &name);
    if (link & 1) return true;
  }
}

// The same through a .hash table (DT_HASH), which hashes every symbol; its chain followed to the end.
bool SysvLookup(const SymbolTable& table, Bytes hash, const std::string& name, Matches* found) {
  uint32_t buckets, chains, i;
  if (!ReadAt(hash, 0, &buckets) || !ReadAt(hash, 4, &chains) || buckets == 0 || chains != table.count ||
      !ReadAt(hash, 8 + uint64_t{SysvHash(name) % buckets} * 4, &i))
    return false;
  const uint64_t chain_at = 8 + uint64_t{buckets} * 4;
  if (chain_at + uint64_t{chains} * 4 > hash.size) return false;
  for (uint32_t steps = 0; i != STN_UNDEF; steps++) {
    if (i >= chains || steps >= chains) return false;
    if (table.Defines(i, name)) found->emplace_back(i, &name);
    if (!ReadAt(hash, chain_at + uint64_t{i} * 4, &i)) return false;
  }
  return true;
}

// The hash table the file links to the symbol table at section `index`: .gnu.hash first, as the
// dynamic linker prefers it.
Elf_Scn* HashSection(Elf* elf, size_t index, bool* gnu) {
  Elf_Scn* sysv = nullptr;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_link != index) continue;
    if (shdr.sh_type == SHT_GNU_HASH) return *gnu = true, scn;
    if (shdr.sh_type == SHT_HASH && shdr.sh_entsize == 4 && !sysv) sysv = scn;
  }
  *gnu = false;
  return sysv;
}

// The defined symbols of `names` in one table, in the table's order, read in place: through its
// hash table when it has one, else by comparing the wanted names' bytes alone. False when the
// file's layout is not one this reads (the caller walks the table).
bool Lookup(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, const std::set<std::string>& names,
            std::vector<ElfSymbol>* out) {
  const char* ident = elf_getident(elf, nullptr);
  if (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ || !ident || ident[EI_CLASS] != ELFCLASS64 ||
      ident[EI_DATA] != ELFDATA2LSB || shdr.sh_entsize != sizeof(Elf64_Sym))
    return false;
  Elf_Scn* strings = elf_getscn(elf, shdr.sh_link);
  GElf_Shdr strings_header;
  if (!strings || !gelf_getshdr(strings, &strings_header) || strings_header.sh_type != SHT_STRTAB) return false;
  SymbolTable table{RawSection(scn), RawSection(strings), 0};
  if (!table.symbols.data || table.symbols.size != shdr.sh_size) return false;
  table.count = table.symbols.size / sizeof(Elf64_Sym);
  Matches found;
  bool gnu = false;
  Elf_Scn* hash = shdr.sh_type == SHT_DYNSYM ? HashSection(elf, elf_ndxscn(scn), &gnu) : nullptr;
  if (hash) {
    for (const std::string& name : names)
      if (!(gnu ? GnuLookup : SysvLookup)(table, RawSection(hash), name, &found)) return false;
  } else {
    // a name's first byte tells most symbols apart before any wanted name is compared
    std::array<bool, 256> firsts{};
    for (const std::string& name : names) firsts[static_cast<uint8_t>(name.c_str()[0])] = true;
    for (size_t i = 0; i < table.count; i++) {
      const Elf64_Sym sym = table.At(i);
      if (sym.st_name >= table.strings.size || !firsts[table.strings.data[sym.st_name]]) continue;
      for (const std::string& name : names)
        if (table.Defines(i, name)) found.emplace_back(i, &name);
    }
  }
  std::sort(found.begin(), found.end());
  for (const auto& [i, name] : found) {
    const Elf64_Sym sym = table.At(i);
    out->push_back({*name, sym.st_value, sym.st_size, ELF64_ST_TYPE(sym.st_info)});
  }
  return true;
}

}  // namespace

std::vector<ElfSymbol> ElfFile::Symbols(const std::function<bool(const char* name, int type)>& wanted,
                                        bool dynamic_only) const {
  std::vector<ElfSymbol> found;
  Elf_Scn* scn = nullptr;
  while (elf_ && (scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && ReadsTable(shdr, dynamic_only)) Walk(elf_, scn, shdr, wanted, &found);
  }
  return found;
}

std::vector<ElfSymbol> ElfFile::SymbolsNamed(const std::set<std::string>& names, bool dynamic_only) const {
  const auto named = [&names](const char* name, int) { return names.count(name) != 0; };
  std::vector<ElfSymbol> found;
  Elf_Scn* scn = nullptr;
  while (elf_ && (scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || !ReadsTable(shdr, dynamic_only)) continue;
    if (!Lookup(elf_, scn, shdr, names, &found)) Walk(elf_, scn, shdr, named, &found);
  }
  return found;
}

namespace {

Elf_Scn* FindSection(Elf* elf, const char* name) {
  size_t names;
  if (!elf || elf_getshdrstrndx(elf, &names) != 0) return nullptr;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    const char* found = gelf_getshdr(scn, &shdr) ? elf_strptr(elf, names, shdr.sh_name) : nullptr;
    if (found && std::strcmp(found, name) == 0) return scn;
  }
  return nullptr;
}

}  // namespace

bool ElfFile::HasSection(const char* name) const { return FindSection(elf_, name) != nullptr; }

std::vector<uint8_t> ElfFile::SectionBytes(const char* name) const {
  Elf_Scn* scn = FindSection(elf_, name);
  Elf_Data* data = scn ? elf_rawdata(scn, nullptr) : nullptr;
  if (!data || !data->d_buf) return {};
  const auto* bytes = static_cast<const uint8_t*>(data->d_buf);
  return std::vector<uint8_t>(bytes, bytes + data->d_size);
}

bool ElfFile::Segment(uint32_t type, GElf_Phdr* out) const {
  size_t count = 0;
  if (!elf_ || elf_getphdrnum(elf_, &count) != 0) return false;
  for (size_t i = 0; i < count; i++) {
    if (gelf_getphdr(elf_, static_cast<int>(i), out) && out->p_type == type) return true;
  }
  return false;
}

int64_t ElfFile::FileOffset(uint64_t vaddr) const {
  size_t count = 0;
  if (!elf_ || elf_getphdrnum(elf_, &count) != 0) return -1;
  for (size_t i = 0; i < count; i++) {
    GElf_Phdr phdr;
    if (!gelf_getphdr(elf_, static_cast<int>(i), &phdr) || phdr.p_type != PT_LOAD) continue;
    if (vaddr >= phdr.p_vaddr && vaddr < phdr.p_vaddr + phdr.p_filesz)
      return static_cast<int64_t>(vaddr - phdr.p_vaddr + phdr.p_offset);
  }
  return -1;
}

std::vector<uint8_t> ElfFile::Read(uint64_t vaddr, size_t size) const {
  const int64_t offset = size ? FileOffset(vaddr) : -1;
  if (offset < 0 || FileOffset(vaddr + size - 1) != offset + static_cast<int64_t>(size) - 1) return {};
  std::vector<uint8_t> out(size);
  return pread(fd_, out.data(), size, offset) == static_cast<ssize_t>(size) ? out : std::vector<uint8_t>{};
}

}  // namespace kreplay
