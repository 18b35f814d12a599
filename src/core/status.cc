#include "core/status.h"

namespace dscale {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kDataLoss: return "data loss";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return {code_, std::string(context) + ": " + message_};
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return message_;
}

}  // namespace dscale
