#pragma once
// Runs a command line through the shell for end-to-end tests of the `dscale` binary.

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace dscale::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout, then stderr when `merge_stderr`
};

inline CommandResult RunCommand(const std::string& command, bool merge_stderr = true) {
  CommandResult result;
  const std::string line = command + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// `dscale <args>`.
inline CommandResult RunDscale(const std::string& args, bool merge_stderr = true) {
  return RunCommand(std::string(DSCALE_BINARY) + " " + args, merge_stderr);
}

}  // namespace dscale::testing
