#include "elf_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

namespace kreplay {

ElfSymbols ReadElfSymbols(const std::string& path, const std::set<std::string>& wanted, bool dynamic_only) {
  ElfSymbols out;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  GElf_Ehdr header;
  if (elf && gelf_getehdr(elf, &header)) {
    out.valid = true;
    out.relocatable = header.e_type == ET_DYN;
  }
  Elf_Scn* scn = nullptr;
  while (out.valid && (scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || (shdr.sh_type != SHT_DYNSYM && (dynamic_only || shdr.sh_type != SHT_SYMTAB)))
      continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    const size_t count = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
    for (size_t i = 0; data && i < count; i++) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF) continue;
      const int type = GELF_ST_TYPE(sym.st_info);
      if (type != STT_FUNC && type != STT_OBJECT) continue;
      const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
      if (name && wanted.count(name)) out.values.emplace(name, sym.st_value);
    }
  }
  // a symbol's file offset: its address within the loaded segment that holds it
  size_t segments = 0;
  if (out.valid && elf_getphdrnum(elf, &segments) == 0) {
    for (size_t i = 0; i < segments; i++) {
      GElf_Phdr phdr;
      if (!gelf_getphdr(elf, static_cast<int>(i), &phdr) || phdr.p_type != PT_LOAD) continue;
      for (const auto& [name, value] : out.values) {
        if (value >= phdr.p_vaddr && value < phdr.p_vaddr + phdr.p_memsz)
          out.offsets.emplace(name, value - phdr.p_vaddr + phdr.p_offset);
      }
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return out;
}

}  // namespace kreplay
