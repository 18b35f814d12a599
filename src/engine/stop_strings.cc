#include "engine/stop_strings.h"

#include <algorithm>

namespace dscale {

bool StopStringScanner::Push(std::span<const std::string> stops, std::string_view token_text) {
  size_t longest = 0;
  for (const std::string& stop : stops) longest = std::max(longest, stop.size());
  std::string window = tail_;
  window.append(token_text);
  bool found = false;
  for (const std::string& stop : stops) {
    // A stop string seen before this token lay wholly in earlier bytes; the tail keeps fewer
    // than its length of them, so every match found here ends in this token's bytes.
    found = found || window.find(stop) != std::string::npos;
  }
  const size_t keep = longest > 0 ? longest - 1 : 0;
  tail_.assign(window, window.size() - std::min(window.size(), keep));
  return found;
}

}  // namespace dscale
