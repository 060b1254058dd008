#include "elf_file.h"

#include <fcntl.h>
#include <libelf.h>
#include <unistd.h>

#include <cstring>

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

std::vector<ElfSymbol> ElfFile::Symbols(const std::function<bool(const char* name, int type)>& wanted,
                                        bool dynamic_only) const {
  std::vector<ElfSymbol> found;
  Elf_Scn* scn = nullptr;
  while (elf_ && (scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || (shdr.sh_type != SHT_DYNSYM && (dynamic_only || shdr.sh_type != SHT_SYMTAB)))
      continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    const size_t count = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
    for (size_t i = 0; data && i < count; i++) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF) continue;
      const char* name = elf_strptr(elf_, shdr.sh_link, sym.st_name);
      const int type = GELF_ST_TYPE(sym.st_info);
      if (name && wanted(name, type)) found.push_back({name, sym.st_value, sym.st_size, type});
    }
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
