#include "cli_util.h"

#include <charconv>
#include <cstdio>

namespace dscale::cli {

Result<std::vector<int32_t>> ParseIdList(const std::string& text, const std::string& flag) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || id < 0) {
      return InvalidArgument(flag + ": expected comma-separated non-negative token ids, got \"" +
                             item + "\"");
    }
    ids.push_back(id);
    begin = end + 1;
  }
  return ids;
}

int ReportError(const std::string& command, const Status& status) {
  std::fprintf(stderr, "dscale %s: %s\n", command.c_str(), status.message().c_str());
  return 1;
}

}  // namespace dscale::cli
