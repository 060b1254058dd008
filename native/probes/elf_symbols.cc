#include "elf_symbols.h"

#include "elf_file.h"

namespace kreplay {

ElfSymbols ReadElfSymbols(const std::string& path, const std::set<std::string>& wanted, bool dynamic_only) {
  ElfSymbols out;
  const ElfFile file(path);
  if (!file.ok()) return out;
  out.valid = true;
  out.relocatable = file.relocatable();
  const auto accept = [&wanted](const char* name, int type) {
    return (type == STT_FUNC || type == STT_OBJECT) && wanted.count(name) != 0;
  };
  for (const ElfSymbol& symbol : file.Symbols(accept, dynamic_only)) {
    out.values.emplace(symbol.name, symbol.value);
    // where its bytes are in the file: only for a symbol in a loaded segment's file part
    const int64_t offset = file.FileOffset(symbol.value);
    if (offset >= 0) out.offsets.emplace(symbol.name, static_cast<uint64_t>(offset));
  }
  return out;
}

}  // namespace kreplay
