#pragma once
// Levelled logging to stderr. The level is checked before the message is formatted, so a
// disabled DSCALE_LOG(kDebug) << Expensive() costs one comparison.

#include <sstream>

namespace dscale {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
inline bool LogEnabled(LogLevel level) { return level >= GetLogLevel(); }

// One log line; written to stderr (with level and source location) when destroyed.
class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line);
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

}  // namespace dscale

#define DSCALE_LOG(level)                                          \
  if (!::dscale::LogEnabled(::dscale::LogLevel::level)) {          \
  } else                                                           \
    ::dscale::LogLine(::dscale::LogLevel::level, __FILE__, __LINE__).stream()
