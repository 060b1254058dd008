#include "elf_symbols.h"

#include "elf_file.h"

namespace kreplay {

ElfSymbols ReadElfSymbols(const std::string& path, const std::set<std::string>& wanted, bool dynamic_only) {
  ElfSymbols out;
  const ElfFile file(path);
  if (!file.ok()) return out;
  out.valid = true;
  out.relocatable = file.relocatable();
  for (const ElfSymbol& symbol : file.SymbolsNamed(wanted, dynamic_only)) {
    if (symbol.type != STT_FUNC && symbol.type != STT_OBJECT) continue;
    // a name defined more than once (.symtab and .dynsym, or local twins): the first is the one
    // read, its value and its offset both, never one of each
    if (!out.values.emplace(symbol.name, symbol.value).second) continue;
    // where its bytes are in the file: only for a symbol in a loaded segment's file part
    const int64_t offset = file.FileOffset(symbol.value);
    if (offset >= 0) out.offsets.emplace(symbol.name, static_cast<uint64_t>(offset));
  }
  return out;
}

}  // namespace kreplay
