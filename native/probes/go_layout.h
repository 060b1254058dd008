// Where Go's runtime keeps two fields the Go probes read, from the binary's own DWARF: the runtime's
// struct layouts move between Go versions, and a Go binary describes its own. Plain functions of the
// file: no kernel in here.
#pragma once

#include <cstdint>
#include <string>

namespace kreplay {

struct GoLayout {
  // offsetof(runtime.m, curg): the goroutine an M runs while it is on its system stack (g0)
  uint32_t m_curg = 0;
  // offsetof(runtime.g, gopc): the pc of the `go` statement that created the goroutine
  uint32_t g_gopc = 0;
};

// Both offsets, or zeros when the binary has no DWARF (built with -ldflags=-w) or either is missing.
GoLayout ReadGoLayout(const std::string& path);

}  // namespace kreplay
