#include "server/forced_tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

namespace dscale::server {

ForcedToolCalls::ForcedToolCalls(std::string function, uint64_t id_seed)
    : function_(std::move(function)), id_seed_(id_seed) {}

ToolCallStream::Piece ForcedToolCalls::Finish() {
  ToolCallStream::Piece piece;
  const auto add = [&](std::string name, std::string arguments) {
    piece.calls.push_back({.id = ToolCallId(id_seed_, calls_++),
                           .call = {.name = std::move(name), .arguments = std::move(arguments)}});
  };
  const size_t start = text_.find_first_not_of(" \t\r\n");
  const std::string answer = start == std::string::npos ? std::string() : text_.substr(start);
  if (!function_.empty()) {
    add(function_, answer);
    return piece;
  }
  // Members in the order written; the schema made every item {"name": string, "parameters": {}}.
  const auto calls = nlohmann::ordered_json::parse(answer, nullptr, /*allow_exceptions=*/false);
  const auto reads_as_call = [](const nlohmann::ordered_json& call) {
    return call.is_object() && call.contains("name") && call["name"].is_string() &&
           call.contains("parameters");
  };
  if (!calls.is_array() || calls.empty() ||
      !std::all_of(calls.begin(), calls.end(), reads_as_call)) {
    piece.content = text_;
    return piece;
  }
  for (const nlohmann::ordered_json& call : calls) {
    add(call["name"].get<std::string>(), call["parameters"].dump());
  }
  return piece;
}

}  // namespace dscale::server
