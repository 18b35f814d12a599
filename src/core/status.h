#pragma once
// Status and Result<T>: how expected failures (bad files, bad requests, exhausted KV pages)
// travel. No exception crosses a module boundary; callers must look at every Status.

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/check.h"

namespace dscale {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // a parameter or request field is wrong
  kNotFound,           // a file or tensor is missing
  kDataLoss,           // a file is corrupt or truncated
  kIoError,            // the OS refused (open, mmap, write)
  kResourceExhausted,  // e.g. no free KV pages: the scheduler can wait and retry
  kOutOfRange,         // a request that can never fit: the context length, the whole KV cache
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "context: message", keeping the code. Used to add the file or field name on the way up.
  Status WithContext(std::string_view context) const;
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
inline Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status DataLoss(std::string msg) { return {StatusCode::kDataLoss, std::move(msg)}; }
inline Status IoError(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
inline Status ResourceExhausted(std::string msg) {
  return {StatusCode::kResourceExhausted, std::move(msg)};
}
inline Status OutOfRange(std::string msg) { return {StatusCode::kOutOfRange, std::move(msg)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    DSCALE_CHECK_MSG(!status_.ok(), "Result built from an OK Status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    DSCALE_CHECK_MSG(ok(), status_.message().c_str());
    return *value_;
  }
  const T& value() const& {
    DSCALE_CHECK_MSG(ok(), status_.message().c_str());
    return *value_;
  }
  T&& value() && {
    DSCALE_CHECK_MSG(ok(), status_.message().c_str());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace dscale

#define DSCALE_INTERNAL_CONCAT2(a, b) a##b
#define DSCALE_INTERNAL_CONCAT(a, b) DSCALE_INTERNAL_CONCAT2(a, b)

#define DSCALE_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::dscale::Status dscale_status_ = (expr); \
    if (!dscale_status_.ok()) return dscale_status_; \
  } while (0)

// DSCALE_ASSIGN_OR_RETURN(auto x, MakeX()); returns the error Status from the enclosing function.
#define DSCALE_ASSIGN_OR_RETURN(lhs, expr) \
  DSCALE_INTERNAL_ASSIGN_OR_RETURN(DSCALE_INTERNAL_CONCAT(dscale_result_, __LINE__), lhs, expr)
#define DSCALE_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return tmp.status();                    \
  lhs = std::move(tmp).value()
