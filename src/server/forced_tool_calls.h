#pragma once
// The answer of a chat request whose tool_choice forces calls (server/tool_choice.h), held by its
// schema to their JSON and returned as calls: a named function's arguments object is its one
// call, streamed as it comes (the call with its id and name at the answer's first text but
// whitespace, then the arguments piece by piece, as OpenAI streams them); "required"'s array of
// {"name", "parameters"} is its calls in order, read when the output ends. An output cut off
// before the value closed: a named function's call carries the arguments written so far
// (finish_reason "length" says so), and "required"'s text, which no longer reads as calls, is
// content. Not thread-safe: one per choice.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_stream.h"

namespace dscale::server {

class ForcedToolCalls {
 public:
  struct Piece {
    std::string content;
    std::vector<ToolCall> calls;  // calls begun, with their arguments so far
    std::string arguments;        // more of the last call's arguments
  };

  // `function`: the named function; empty for "required". `id_seed` makes the calls' ids.
  ForcedToolCalls(std::string function, uint64_t id_seed);

  Piece Push(std::string_view text);
  Piece Finish();

  int32_t calls() const { return calls_; }

 private:
  ToolCall Call(std::string name, std::string arguments);

  std::string function_;
  uint64_t id_seed_;
  std::string text_;      // "required": the answer so far
  bool started_ = false;  // a named function's call was sent
  int32_t calls_ = 0;
};

}  // namespace dscale::server
