#pragma once
// A chat output's text split into the assistant's content and its calls to tools, as it streams
// (chat requests with tools and tool_choice "auto"). Text is content until the format's opening
// marker ("<tool_call>" in Qwen3's); what follows, up to the closing marker, is one call
// (tool_call_format.h). Like OutputText, it never sends what it may take back: text that could
// be the start of an opening marker is held until it cannot, and a call's text until it closes.
// The rules, the same whether the text comes at once or token by token:
//   - text before the first call is content as written;
//   - after a call, text that is only whitespace (the newline between two calls, the one before
//     the end of the turn) is dropped, other text is content;
//   - a block that does not read as a call, or is still open when the output ends, is content,
//     markers and all.
// Where the format has no markers (Llama 3.1's), an output whose first text but whitespace is
// "{" is held to its end and is one call if it reads as one; any other output is content as it
// comes.
// Not thread-safe: one per choice.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/tokenizer/chat_format.h"
#include "io/tokenizer/tool_call_format.h"

namespace dscale::server {

// A call as the response reports it.
struct ToolCall {
  std::string id;  // "call_" and 24 hex digits, unique within the response
  ChatToolCall call;
};

// An id unique within a response: `prefix`, "_" and 24 hex digits from (`seed`, `index`).
std::string ResponsePartId(std::string_view prefix, uint64_t seed, int32_t index);
// The id of a response's call `index`: "call_…".
inline std::string ToolCallId(uint64_t seed, int32_t index) {
  return ResponsePartId("call", seed, index);
}

class ToolCallStream {
 public:
  struct Piece {
    std::string content;
    std::vector<ToolCall> calls;
  };

  // `markers`: the format's (ToolCallMarkersOf); `types`: the request's tools' (Qwen3.5 reads
  // values by them); `id_seed` makes the calls' ids.
  ToolCallStream(ChatFormat format, ToolCallMarkers markers, ToolParameterTypes types,
                 uint64_t id_seed);

  Piece Push(std::string_view text);
  // The output ended: the rest.
  Piece Finish();

  // Calls returned so far.
  int32_t calls() const { return calls_; }

 private:
  void Scan(bool final, Piece* piece);
  // The format without markers: the whole output is a call or content.
  void ScanWhole(bool final, Piece* piece);
  // Content text found at the top level; held while it is whitespace after a call.
  void AddContent(std::string_view text, bool final, Piece* piece);
  void CloseBlock(std::string_view body, Piece* piece);

  ChatFormat format_;
  ToolCallMarkers markers_;
  ToolParameterTypes types_;
  uint64_t id_seed_;
  std::string pending_;     // not yet sent: at the top level, or a block's body after its marker
  std::string whitespace_;  // after a call: whitespace held until text or a call follows
  bool in_block_ = false;   // with markers: inside a call's block; without: holding the output
  bool decided_ = false;    // without markers: the output is content
  int32_t calls_ = 0;
};

}  // namespace dscale::server
