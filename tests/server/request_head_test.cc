// Request heads before cpp-httplib sees them: where a head ends (found byte by byte, with the
// field and byte limits), and which framing is refused with which status.

#include "server/request_head.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace dscale::server {
namespace {

std::string Head(const std::string& method, const std::vector<std::string>& fields) {
  std::string head = method + " /v1/completions HTTP/1.1\r\nHost: x\r\n";
  for (const std::string& f : fields) head += f + "\r\n";
  return head + "\r\n";
}

TEST(HeadScannerTest, FindsTheEndOfAHeadArrivingByteByByte) {
  const ConnectionLimits limits;
  const std::string head = Head("POST", {"Content-Length: 2"});
  const std::string bytes = head + "{}GET /health HTTP/1.1\r\n";
  HeadScanner scanner(limits);
  size_t complete_at = 0;
  for (size_t n = 1; n <= bytes.size(); ++n) {
    const HeadScanner::State state = scanner.Scan(std::string_view(bytes).substr(0, n));
    if (state == HeadScanner::State::kComplete) {
      complete_at = n;
      break;
    }
    ASSERT_EQ(state, HeadScanner::State::kIncomplete) << n;
  }
  EXPECT_EQ(complete_at, head.size());
  EXPECT_EQ(scanner.head_bytes(), head.size());
}

TEST(HeadScannerTest, RefusesTooManyFieldsAndTooManyBytes) {
  const ConnectionLimits limits{.max_header_bytes = 1000, .max_headers = 5};
  std::vector<std::string> fields;
  for (int i = 0; i < 5; ++i) fields.push_back("X-" + std::to_string(i) + ": y");
  {
    HeadScanner scanner(limits);  // Host + 4 fields: within the limit
    EXPECT_EQ(scanner.Scan(Head("GET", std::vector(fields.begin(), fields.end() - 1))),
              HeadScanner::State::kComplete);
  }
  {
    HeadScanner scanner(limits);  // Host + 5 fields, refused before the blank line
    const std::string head = Head("GET", fields);
    EXPECT_EQ(scanner.Scan(head.substr(0, head.size() - 2)), HeadScanner::State::kTooLarge);
    const ApiError e = scanner.TooLarge();
    EXPECT_EQ(e.status, 431);
    EXPECT_NE(e.message.find("more than 5 header fields"), std::string::npos) << e.message;
  }
  {
    HeadScanner scanner(limits);  // one long field without an end
    EXPECT_EQ(scanner.Scan("GET / HTTP/1.1\r\nX: " + std::string(1000, 'a')),
              HeadScanner::State::kTooLarge);
    EXPECT_NE(scanner.TooLarge().message.find("exceed 1000 bytes"), std::string::npos);
  }
}

TEST(CheckRequestHeadTest, AcceptsOrdinaryHeadsAndDropsRange) {
  const ConnectionLimits limits;
  for (const std::string& head :
       {Head("GET", {}), Head("GET", {"Content-Length: 0"}), Head("POST", {"Content-Length: 12"}),
        Head("POST", {"Content-Length: 12", "content-length: 12"}),
        Head("POST", {"Transfer-Encoding: chunked"}),
        Head("POST", {"Content-Length: 3", "Content-Encoding: identity"}), Head("DELETE", {}),
        Head("DELETE", {"Content-Length: 2"})}) {
    const HeadCheck check = CheckRequestHead(head, limits);
    EXPECT_FALSE(check.refusal) << head << check.refusal->message;
    EXPECT_EQ(check.head, head);
  }
  const HeadCheck ranged =
      CheckRequestHead(Head("POST", {"Range: bytes=0-5", "Content-Length: 2"}), limits);
  ASSERT_FALSE(ranged.refusal);
  EXPECT_EQ(ranged.head, Head("POST", {"Content-Length: 2"}));
}

TEST(CheckRequestHeadTest, RefusesAmbiguousOrUnboundedFramingNamingWhy) {
  const ConnectionLimits limits{.max_body_bytes = 1000};
  const std::vector<std::pair<std::string, std::pair<int, std::string>>> cases = {
      {Head("POST", {"Content-Length: 5", "Content-Length: 6"}),
       {400, "conflicting Content-Length headers (5 and 6)"}},
      {Head("POST", {"Content-Length: 5", "Transfer-Encoding: chunked"}),
       {400, "both Content-Length and Transfer-Encoding"}},
      {Head("POST", {"Transfer-Encoding: chunked", "Transfer-Encoding: chunked"}),
       {400, "Transfer-Encoding given more than once"}},
      {Head("POST", {"Transfer-Encoding: gzip, chunked"}), {501, "only chunked"}},
      {Head("POST", {"Content-Length: 5", "Content-Encoding: gzip"}),
       {415, "Content-Encoding \"gzip\" is not supported"}},
      {Head("POST", {"Transfer-Encoding: chunked", "Content-Encoding: deflate"}),
       {415, "send the request body uncompressed"}},
      {Head("POST", {}), {411, "needs Content-Length or Transfer-Encoding: chunked"}},
      {Head("POST", {"Content-Length: 1001"}), {413, "(1001 bytes) is larger than the limit"}},
      {Head("POST", {"Content-Length: 99999999999999999999"}), {400, "Content-Length: expected"}},
      {Head("POST", {"Content-Length: -5"}), {400, "Content-Length: expected a number"}},
      {Head("POST", {"Content-Length: 5, 5"}), {400, "Content-Length: expected a number"}},
      {Head("GET", {"Content-Length: 5"}), {400, "a GET request has no body"}},
      {Head("GET", {"Transfer-Encoding: chunked"}), {400, "a GET request has no body"}},
      {Head("GET", {"X-Long: " + std::string(9000, 'a')}), {431, "exceeds 8192 bytes"}},
      {Head("GET", {"X-Folded: a", " continued"}), {400, "\"name: value\""}},
      {Head("GET", {"X-Space : a"}), {400, "\"name: value\""}},
      {Head("GET", {"X-Bare: a\nY: b"}), {400, "ended by CRLF"}},
  };
  for (const auto& [head, want] : cases) {
    const HeadCheck check = CheckRequestHead(head, limits);
    ASSERT_TRUE(check.refusal) << head.substr(0, 200);
    EXPECT_EQ(check.refusal->status, want.first) << head.substr(0, 200);
    EXPECT_NE(check.refusal->message.find(want.second), std::string::npos)
        << check.refusal->message;
  }
}

TEST(CheckRequestHeadTest, ErrorResponsesCloseTheConnection) {
  const std::string bytes =
      ErrorResponseBytes({.status = 431, .message = "the request has more than 100 fields"});
  EXPECT_TRUE(bytes.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n")) << bytes;
  EXPECT_NE(bytes.find("Connection: close\r\n"), std::string::npos);
  const std::string body = bytes.substr(bytes.find("\r\n\r\n") + 4);
  EXPECT_NE(bytes.find("Content-Length: " + std::to_string(body.size()) + "\r\n"),
            std::string::npos);
  EXPECT_NE(body.find("\"message\":\"the request has more than 100 fields\""), std::string::npos);
  const std::string busy = ErrorResponseBytes({.status = 503, .message = "busy"});
  EXPECT_NE(busy.find("Retry-After: 1\r\n"), std::string::npos);
}

}  // namespace
}  // namespace dscale::server
