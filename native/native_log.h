// Log lines from libbpf and from this addon, collected from any thread and
// handed to JS in order.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kreplay {

// Routes libbpf's warnings and info lines into the collector.
void InstallLibbpfLog();

// `level` is "warn" or "info".
void AppendLog(const char* level, std::string line);

// Lines collected since the last call, each as {level, text}.
std::vector<std::pair<std::string, std::string>> DrainLog();

}  // namespace kreplay
