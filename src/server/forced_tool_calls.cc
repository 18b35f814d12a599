#include "server/forced_tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

namespace dscale::server {

ForcedToolCalls::ForcedToolCalls(std::string function, uint64_t id_seed)
    : function_(std::move(function)), id_seed_(id_seed) {}

ToolCall ForcedToolCalls::Call(std::string name, std::string arguments) {
  return {.id = ToolCallId(id_seed_, calls_++),
          .call = {.name = std::move(name), .arguments = std::move(arguments)}};
}

ForcedToolCalls::Piece ForcedToolCalls::Push(std::string_view text) {
  Piece piece;
  if (function_.empty()) {
    text_ += text;
    return piece;
  }
  if (started_) {
    piece.arguments = text;
    return piece;
  }
  // Whitespace before the arguments' "{" is dropped.
  const size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return piece;
  started_ = true;
  piece.calls.push_back(Call(function_, std::string(text.substr(start))));
  return piece;
}

ForcedToolCalls::Piece ForcedToolCalls::Finish() {
  Piece piece;
  if (!function_.empty()) {
    if (!started_) {  // an answer of whitespace: the call, with no arguments
      started_ = true;
      piece.calls.push_back(Call(function_, ""));
    }
    return piece;
  }
  // Members in the order written; a whole answer is an array of {"name": string, "parameters"}.
  const auto calls = nlohmann::ordered_json::parse(text_, nullptr, /*allow_exceptions=*/false);
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
    piece.calls.push_back(Call(call["name"].get<std::string>(), call["parameters"].dump()));
  }
  return piece;
}

}  // namespace dscale::server
