#pragma once
// The request head (request line, header fields, blank line) checked before cpp-httplib parses
// it, so that what the library would accept too generously is refused with a clear error:
//   - more than ConnectionLimits::max_headers fields or max_header_bytes bytes: 431;
//   - Content-Length that is not a number, or given twice with different values: 400;
//   - Content-Length together with Transfer-Encoding, or Transfer-Encoding twice: 400;
//   - a Transfer-Encoding other than chunked: 501;
//   - a Content-Encoding other than identity: 415 (no OpenAI client compresses requests; a
//     compressed body would need inflating before its size is known);
//   - a body (POST, PUT, PATCH) framed by neither Content-Length nor chunked: 411 (a DELETE
//     framed by neither has no body);
//   - a Content-Length above max_body_bytes: 413, before any of the body is read;
//   - a body on GET, HEAD or OPTIONS: 400.
// Range fields are dropped: no route serves partial content.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/connection_limits.h"

namespace dscale::server {

// Finds the end of a head in bytes as they arrive, looking at each byte once.
class HeadScanner {
 public:
  enum class State { kIncomplete, kComplete, kTooLarge };

  explicit HeadScanner(const ConnectionLimits& limits) : limits_(limits) {}

  // `bytes`: everything received so far for this request (a prefix of the previous call's
  // bytes, extended). kComplete: head_bytes() is the head's length with its blank line.
  State Scan(std::string_view bytes);
  size_t head_bytes() const { return head_bytes_; }
  // kTooLarge: which limit (a 431 error).
  ApiError TooLarge() const;

 private:
  const ConnectionLimits& limits_;
  size_t scanned_ = 0;
  size_t line_start_ = 0;
  int32_t lines_ = 0;
  size_t head_bytes_ = 0;
  bool too_many_fields_ = false;
};

struct HeadCheck {
  std::optional<ApiError> refusal;  // the head is refused with this error
  std::string head;                 // otherwise: the head to hand on (Range fields dropped)
};

// `head`: a complete head as HeadScanner found it.
HeadCheck CheckRequestHead(std::string_view head, const ConnectionLimits& limits);

// A whole HTTP/1.1 response carrying `error` as its JSON body, closing the connection.
std::string ErrorResponseBytes(const ApiError& error);

}  // namespace dscale::server
