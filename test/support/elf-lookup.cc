// What native/probes/elf_file.cc finds for an ELF file and a set of names, both ways: the walk of
// every symbol (Symbols, filtered on the name) and the lookup that reads only what it needs
// (SymbolsNamed). One symbol a line: "walk|named <TAB> name <TAB> value (hex) <TAB> size <TAB> STT_ type";
// then what elf_symbols.cc's ReadElfSymbols makes of them, a name a line:
// "read <TAB> name <TAB> value (hex) <TAB> file offset (hex, - when none)".
// Usage: elf-lookup FILE dynamic|all [NAME...]
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "elf_file.h"
#include "elf_symbols.h"

namespace {

void Print(const char* how, const std::vector<kreplay::ElfSymbol>& symbols) {
  for (const kreplay::ElfSymbol& s : symbols)
    std::printf("%s\t%s\t%llx\t%llu\t%d\n", how, s.name.c_str(), static_cast<unsigned long long>(s.value),
                static_cast<unsigned long long>(s.size), s.type);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const kreplay::ElfFile file(argv[1]);
  const std::set<std::string> names(argv + 3, argv + argc);
  const bool dynamic_only = std::string(argv[2]) == "dynamic";
  std::printf("ok\t%d\n", file.ok() ? 1 : 0);
  Print("walk", file.Symbols([&names](const char* name, int) { return names.count(name) != 0; }, dynamic_only));
  Print("named", file.SymbolsNamed(names, dynamic_only));
  const kreplay::ElfSymbols read = kreplay::ReadElfSymbols(argv[1], names, dynamic_only);
  for (const auto& [name, value] : read.values) {
    const auto offset = read.offsets.find(name);
    std::printf("read\t%s\t%llx\t", name.c_str(), static_cast<unsigned long long>(value));
    if (offset == read.offsets.end())
      std::printf("-\n");
    else
      std::printf("%llx\n", static_cast<unsigned long long>(offset->second));
  }
  return 0;
}
