#pragma once
// What one HTTP connection may take from the server, whatever the client does. The head reader
// (head_reader.h) enforces the head's limits and deadlines before any worker thread sees the
// connection; the guarded stream (guarded_stream.h) enforces the body's.

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace dscale::server {

struct ConnectionLimits {
  // Body bytes as received after the headers, chunk framing included; beyond: 413. Bodies must
  // be framed by Content-Length or chunked transfer coding, and not content-encoded (415).
  size_t max_body_bytes = 8u << 20;
  // The request line and headers together; beyond: 431.
  size_t max_header_bytes = 64u << 10;
  // Header fields per request; beyond: 431.
  int32_t max_headers = 100;
  // From a request's first byte (a new connection: from its accept) to the end of its headers;
  // beyond: 408 and the connection is closed.
  std::chrono::milliseconds header_timeout{10'000};
  // From the end of the headers to the end of the body; beyond: 408, closed.
  std::chrono::milliseconds body_timeout{30'000};
  // The body stalls: no byte for this long is a 408 too.
  std::chrono::milliseconds body_stall_timeout{5'000};
  // An idle keep-alive connection is closed after this long without a new request.
  std::chrono::milliseconds idle_timeout{5'000};
  // A response the client does not read for this long is abandoned.
  std::chrono::milliseconds write_timeout{5'000};
  // Open connections at most; the next one gets 503 at once and is closed.
  int32_t max_connections = 1024;
};

}  // namespace dscale::server
