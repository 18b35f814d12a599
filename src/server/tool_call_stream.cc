#include "server/tool_call_stream.h"

#include <cstdio>
#include <utility>

#include "dvl/deterministic_random.h"
#include "server/output_text.h"

namespace dscale::server {
namespace {

bool IsWhitespace(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

std::string ResponsePartId(std::string_view prefix, uint64_t seed, int32_t index) {
  const uint64_t a = dvl::SplitMix64Mix(seed + 2 * static_cast<uint64_t>(index) + 1);
  const uint64_t b = dvl::SplitMix64Mix(a);
  char hex[32];
  std::snprintf(hex, sizeof(hex), "%016llx%08llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b >> 32));
  return std::string(prefix) + "_" + hex;
}

ToolCallStream::ToolCallStream(ChatFormat format, ToolCallMarkers markers, ToolParameterTypes types,
                               uint64_t id_seed)
    : format_(format), markers_(markers), types_(std::move(types)), id_seed_(id_seed) {}

ToolCallStream::Piece ToolCallStream::Push(std::string_view text) {
  Piece piece;
  pending_ += text;
  Scan(/*final=*/false, &piece);
  return piece;
}

ToolCallStream::Piece ToolCallStream::Finish() {
  Piece piece;
  if (markers_.open.empty()) {
    ScanWhole(/*final=*/true, &piece);
    return piece;
  }
  Scan(/*final=*/true, &piece);
  if (in_block_) {
    // Still open: not a call.
    AddContent(std::string(markers_.open) + pending_, /*final=*/true, &piece);
    pending_.clear();
    in_block_ = false;
  }
  return piece;
}

void ToolCallStream::ScanWhole(bool final, Piece* piece) {
  const size_t start = pending_.find_first_not_of(" \t\r\n");
  if (!in_block_ && !decided_ && start != std::string::npos && pending_[start] == '{') {
    in_block_ = true;
  }
  if (in_block_) {
    if (!final) return;  // held to the end
    std::optional<ChatToolCall> call = ParseToolCall(format_, pending_, types_);
    if (call) {
      piece->calls.push_back({.id = ToolCallId(id_seed_, calls_), .call = std::move(*call)});
      ++calls_;
    } else {
      piece->content += pending_;
    }
    pending_.clear();
    return;
  }
  // Content from its first text on; leading whitespace waits to see what follows.
  if (start == std::string::npos && !final && !decided_) return;
  decided_ = true;
  piece->content += pending_;
  pending_.clear();
}

void ToolCallStream::Scan(bool final, Piece* piece) {
  if (markers_.open.empty()) {
    ScanWhole(final, piece);
    return;
  }
  while (true) {
    if (in_block_) {
      const size_t close = pending_.find(markers_.close);
      if (close == std::string::npos) return;
      CloseBlock(std::string_view(pending_).substr(0, close), piece);
      pending_.erase(0, close + markers_.close.size());
      in_block_ = false;
      continue;
    }
    const size_t open = pending_.find(markers_.open);
    if (open == std::string::npos) {
      const std::string opening(markers_.open);
      const size_t held = final ? 0 : HeldBackForStops(pending_, std::span(&opening, 1));
      AddContent(std::string_view(pending_).substr(0, pending_.size() - held), final, piece);
      pending_.erase(0, pending_.size() - held);
      return;
    }
    AddContent(std::string_view(pending_).substr(0, open), /*final=*/false, piece);
    pending_.erase(0, open + markers_.open.size());
    in_block_ = true;
  }
}

void ToolCallStream::AddContent(std::string_view text, bool final, Piece* piece) {
  if (calls_ == 0) {
    piece->content += text;
    return;
  }
  whitespace_ += text;
  if (IsWhitespace(whitespace_)) {
    if (final) whitespace_.clear();  // trailing whitespace after the last call
    return;
  }
  piece->content += whitespace_;
  whitespace_.clear();
}

void ToolCallStream::CloseBlock(std::string_view body, Piece* piece) {
  std::optional<ChatToolCall> call = ParseToolCall(format_, body, types_);
  if (!call) {
    AddContent(std::string(markers_.open) + std::string(body) + std::string(markers_.close),
               /*final=*/false, piece);
    return;
  }
  whitespace_.clear();  // between two calls
  piece->calls.push_back({.id = ToolCallId(id_seed_, calls_), .call = std::move(*call)});
  ++calls_;
}

}  // namespace dscale::server
