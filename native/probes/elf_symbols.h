// The symbols an ELF file defines, read with libelf: what the uprobe
// scanners look for before attaching (a function must be defined in the
// file, in .symtab or .dynsym), and what the Node hook reads a process's
// memory at (libuv's signal tree).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace kreplay {

struct ElfSymbols {
  // the file opened and parsed as ELF
  bool valid = false;
  // ET_DYN (a shared object or a PIE): values are relative to where it is loaded
  bool relocatable = false;
  // name -> st_value of each wanted symbol defined here (functions and data)
  std::map<std::string, uint64_t> values;
  // name -> where its bytes are in the file (what a uprobe is attached at), for those in a loaded segment
  std::map<std::string, uint64_t> offsets;
};

// The symbols of `wanted` that the file at `path` defines; `dynamic_only`: only those it exports
// (.dynsym, far smaller than .symtab in a large program).
ElfSymbols ReadElfSymbols(const std::string& path, const std::set<std::string>& wanted, bool dynamic_only = false);

}  // namespace kreplay
