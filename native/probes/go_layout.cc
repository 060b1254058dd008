#include "go_layout.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace kreplay {

namespace {

// The offset of the member named `member` of the struct type `die`, or 0.
uint32_t MemberOffset(Dwarf_Die* die, const char* member) {
  Dwarf_Die child;
  if (dwarf_child(die, &child) != 0) return 0;
  do {
    const char* name = dwarf_diename(&child);
    if (dwarf_tag(&child) != DW_TAG_member || !name || std::strcmp(name, member) != 0) continue;
    Dwarf_Attribute attr;
    Dwarf_Word offset = 0;
    // Go gives every member's location as a constant
    if (!dwarf_attr(&child, DW_AT_data_member_location, &attr) || dwarf_formudata(&attr, &offset) != 0) return 0;
    return offset <= UINT32_MAX ? static_cast<uint32_t>(offset) : 0;
  } while (dwarf_siblingof(&child, &child) == 0);
  return 0;
}

}  // namespace

GoLayout ReadGoLayout(const std::string& path) {
  GoLayout layout;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return layout;
  Dwarf* dwarf = dwarf_begin(fd, DWARF_C_READ);
  Dwarf_Off at = 0, next = 0;
  size_t header = 0;
  // Go's types are top-level DIEs of its compile units; both are found before the walk ends
  while (dwarf && (!layout.m_curg || !layout.g_gopc) &&
         dwarf_nextcu(dwarf, at, &next, &header, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die cu, die;
    if (dwarf_offdie(dwarf, at + header, &cu) && dwarf_child(&cu, &die) == 0) {
      do {
        const char* name = dwarf_diename(&die);
        if (dwarf_tag(&die) != DW_TAG_structure_type || !name) continue;
        if (!std::strcmp(name, "runtime.m")) layout.m_curg = MemberOffset(&die, "curg");
        if (!std::strcmp(name, "runtime.g")) layout.g_gopc = MemberOffset(&die, "gopc");
      } while (dwarf_siblingof(&die, &die) == 0);
    }
    at = next;
  }
  if (dwarf) dwarf_end(dwarf);
  close(fd);
  if (!layout.m_curg || !layout.g_gopc) layout = {};
  return layout;
}

}  // namespace kreplay
