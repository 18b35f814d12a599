#pragma once
// Small helpers shared by the subcommands.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dscale::cli {

// "1,2,3" -> {1, 2, 3}. Errors name `flag` and the offending item.
Result<std::vector<int32_t>> ParseIdList(const std::string& text, const std::string& flag);

// Prints "dscale <command>: <message>" to stderr and returns exit code 1.
int ReportError(const std::string& command, const Status& status);

}  // namespace dscale::cli
