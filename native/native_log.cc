#include "native_log.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace kreplay {

namespace {

// Bounded: a verifier log can run to thousands of lines, and nobody may
// drain them for a while.
constexpr size_t kMaxLines = 2000;

std::mutex log_mutex;
std::vector<std::pair<std::string, std::string>> log_lines;
size_t dropped_lines = 0;

int CollectLibbpfLine(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char text[1024];
  int n = vsnprintf(text, sizeof(text), format, args);
  if (n < 0) return 0;
  std::string line(text);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  AppendLog(level == LIBBPF_WARN ? "warn" : "info", std::move(line));
  return n;
}

}  // namespace

void InstallLibbpfLog() { libbpf_set_print(CollectLibbpfLine); }

void AppendLog(const char* level, std::string line) {
  std::lock_guard<std::mutex> lock(log_mutex);
  if (log_lines.size() >= kMaxLines) {
    dropped_lines++;
    return;
  }
  log_lines.emplace_back(level, std::move(line));
}

std::vector<std::pair<std::string, std::string>> DrainLog() {
  std::lock_guard<std::mutex> lock(log_mutex);
  std::vector<std::pair<std::string, std::string>> out;
  out.swap(log_lines);
  if (dropped_lines > 0) {
    out.emplace_back("warn", std::to_string(dropped_lines) + " more native log lines dropped");
    dropped_lines = 0;
  }
  return out;
}

}  // namespace kreplay
