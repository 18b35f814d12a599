#include "server/request_head.h"

#include <strings.h>

#include <algorithm>
#include <vector>

namespace dscale::server {
namespace {

constexpr std::string_view kCrlf = "\r\n";
// cpp-httplib's limit for one header line (CPPHTTPLIB_HEADER_MAX_LENGTH).
constexpr size_t kMaxFieldBytes = 8192;

struct Field {
  std::string_view name;
  std::string_view value;
};

bool NameIs(std::string_view name, std::string_view wanted) {
  return name.size() == wanted.size() && strncasecmp(name.data(), wanted.data(), name.size()) == 0;
}

std::string_view Trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

// The head's fields; false when a line is not "name: value" (or folded onto the previous one).
bool SplitFields(std::string_view head, std::string_view* request_line, std::vector<Field>* out,
                 bool* too_long) {
  size_t at = head.find(kCrlf);
  *request_line = head.substr(0, at);
  if (request_line->find('\n') != std::string_view::npos) return false;
  for (at += 2; at < head.size();) {
    const size_t end = head.find(kCrlf, at);
    const std::string_view line = head.substr(at, end - at);
    at = end + 2;
    if (line.empty()) break;                                                 // the blank line
    if (line.find_first_of("\r\n") != std::string_view::npos) return false;  // a bare CR or LF
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 || line[0] == ' ' || line[0] == '\t' ||
        line[colon - 1] == ' ' || line[colon - 1] == '\t') {
      return false;
    }
    if (line.size() > kMaxFieldBytes) {
      *too_long = true;
      return false;
    }
    out->push_back({line.substr(0, colon), Trim(line.substr(colon + 1))});
  }
  return true;
}

ApiError Refuse(int status, const std::string& message, const std::string& param = "") {
  return {.status = status, .message = message, .param = param};
}

// The body's framing fields, checked against each other and the limits.
struct Framing {
  std::optional<uint64_t> content_length;
  int transfer_encodings = 0;
  std::string_view transfer_encoding;
  std::string_view content_encoding;
};

std::optional<ApiError> AddField(const Field& f, Framing* framing) {
  if (NameIs(f.name, "Content-Length")) {
    if (f.value.empty() || f.value.size() > 18 ||
        !std::all_of(f.value.begin(), f.value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return Refuse(400, "Content-Length: expected a number of bytes, got \"" +
                             std::string(f.value.substr(0, 40)) + "\"");
    }
    const uint64_t length = std::stoull(std::string(f.value));
    if (framing->content_length && *framing->content_length != length) {
      return Refuse(400, "conflicting Content-Length headers (" +
                             std::to_string(*framing->content_length) + " and " +
                             std::to_string(length) + ")");
    }
    framing->content_length = length;
  } else if (NameIs(f.name, "Transfer-Encoding")) {
    ++framing->transfer_encodings;
    framing->transfer_encoding = f.value;
  } else if (NameIs(f.name, "Content-Encoding")) {
    framing->content_encoding = f.value;
  }
  return std::nullopt;
}

bool MethodHasBody(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

std::optional<ApiError> CheckFraming(std::string_view method, const Framing& f,
                                     const ConnectionLimits& limits) {
  if (!f.content_encoding.empty() && !NameIs(f.content_encoding, "identity")) {
    return Refuse(415, "Content-Encoding \"" + std::string(f.content_encoding.substr(0, 40)) +
                           "\" is not supported: send the request body uncompressed");
  }
  if (f.transfer_encodings > 1) return Refuse(400, "Transfer-Encoding given more than once");
  const bool chunked = f.transfer_encodings == 1;
  if (chunked && f.content_length) {
    return Refuse(400, "a request may not have both Content-Length and Transfer-Encoding");
  }
  if (chunked && !NameIs(f.transfer_encoding, "chunked")) {
    return Refuse(501, "Transfer-Encoding \"" + std::string(f.transfer_encoding.substr(0, 40)) +
                           "\" is not supported (only chunked)");
  }
  if (!MethodHasBody(method)) {
    if (chunked || f.content_length.value_or(0) > 0) {
      return Refuse(400, "a " + std::string(method) + " request has no body");
    }
    return std::nullopt;
  }
  if (!chunked && !f.content_length) {
    // A DELETE without framing has no body (RFC 9112, 6.3), as clients send one.
    if (method == "DELETE") return std::nullopt;
    return Refuse(411, "a request body needs Content-Length or Transfer-Encoding: chunked");
  }
  if (f.content_length && *f.content_length > limits.max_body_bytes) {
    return Refuse(413, "the request body (" + std::to_string(*f.content_length) +
                           " bytes) is larger than the limit of " +
                           std::to_string(limits.max_body_bytes) + " bytes (--max-body-bytes)");
  }
  return std::nullopt;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return status >= 500 ? "Internal Server Error" : "Bad Request";
  }
}

}  // namespace

HeadScanner::State HeadScanner::Scan(std::string_view bytes) {
  for (; scanned_ < bytes.size(); ++scanned_) {
    if (bytes[scanned_] != '\n') continue;
    const size_t line_length = scanned_ + 1 - line_start_;
    line_start_ = scanned_ + 1;
    if (line_length == 2 && bytes[scanned_ - 1] == '\r') {
      head_bytes_ = scanned_ + 1;
      return head_bytes_ > limits_.max_header_bytes ? State::kTooLarge : State::kComplete;
    }
    // The request line, then one field per line.
    if (++lines_ > limits_.max_headers + 1) {
      too_many_fields_ = true;
      return State::kTooLarge;
    }
  }
  return bytes.size() > limits_.max_header_bytes ? State::kTooLarge : State::kIncomplete;
}

ApiError HeadScanner::TooLarge() const {
  if (too_many_fields_) {
    return Refuse(
        431, "the request has more than " + std::to_string(limits_.max_headers) + " header fields");
  }
  return Refuse(431, "the request line and headers exceed " +
                         std::to_string(limits_.max_header_bytes) + " bytes");
}

HeadCheck CheckRequestHead(std::string_view head, const ConnectionLimits& limits) {
  std::string_view request_line;
  std::vector<Field> fields;
  bool too_long = false;
  if (!SplitFields(head, &request_line, &fields, &too_long)) {
    if (too_long) {
      return {.refusal = Refuse(
                  431, "a header field exceeds " + std::to_string(kMaxFieldBytes) + " bytes")};
    }
    return {.refusal = Refuse(400, "a header line is not \"name: value\" ended by CRLF")};
  }
  Framing framing;
  for (const Field& f : fields) {
    if (auto error = AddField(f, &framing)) return {.refusal = error};
  }
  const std::string_view method = request_line.substr(0, request_line.find(' '));
  if (auto error = CheckFraming(method, framing, limits)) return {.refusal = error};
  HeadCheck check;
  check.head.reserve(head.size());
  check.head.append(request_line).append(kCrlf);
  for (const Field& f : fields) {
    if (NameIs(f.name, "Range")) continue;
    check.head.append(f.name).append(": ").append(f.value).append(kCrlf);
  }
  check.head.append(kCrlf);
  return check;
}

std::string ErrorResponseBytes(const ApiError& error) {
  const std::string body = error.Body();
  std::string out =
      "HTTP/1.1 " + std::to_string(error.status) + " " + ReasonPhrase(error.status) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n";
  if (error.status == 503) out += "Retry-After: 1\r\n";
  return out + "\r\n" + body;
}

}  // namespace dscale::server
