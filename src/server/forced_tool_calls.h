#pragma once
// The answer of a chat request whose tool_choice forces calls (server/tool_choice.h), held by its
// schema to their JSON, returned as calls once the output ends: a named function's arguments
// object is its one call; "required"'s array of {"name", "parameters"} its calls in order. An
// output cut off before it closed: a named function's call carries the arguments written so far
// (finish_reason "length" says so), and "required"'s text, which no longer reads as calls, is
// content. Not thread-safe: one per choice.

#include <cstdint>
#include <string>
#include <string_view>

#include "server/tool_call_stream.h"

namespace dscale::server {

class ForcedToolCalls {
 public:
  // `function`: the named function; empty for "required". `id_seed` makes the calls' ids.
  ForcedToolCalls(std::string function, uint64_t id_seed);

  // Nothing is sent before the output ends.
  void Push(std::string_view text) { text_ += text; }
  ToolCallStream::Piece Finish();

  int32_t calls() const { return calls_; }

 private:
  std::string function_;
  uint64_t id_seed_;
  std::string text_;
  int32_t calls_ = 0;
};

}  // namespace dscale::server
