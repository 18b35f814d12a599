#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstring>

namespace dscale {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};

const char* LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarning: return "W";
    case LogLevel::kError: return "E";
  }
  return "?";
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(level); }
LogLevel GetLogLevel() { return g_level.load(); }

LogLine::LogLine(LogLevel level, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  stream_ << LevelLetter(level) << ' ' << (base ? base + 1 : file) << ':' << line << "] ";
}

LogLine::~LogLine() {
  stream_ << '\n';
  const std::string text = stream_.str();
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace dscale
