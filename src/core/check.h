#pragma once
// CHECK is for programming errors (broken invariants), never for bad input: bad input gets a
// Status (see status.h) with a message naming the file, field or parameter.

#include <cstdio>
#include <cstdlib>

namespace dscale::internal {
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond, const char* msg) {
  std::fprintf(stderr, "dscale: CHECK failed at %s:%d: %s%s%s\n", file, line, cond,
               msg[0] ? " — " : "", msg);
  std::abort();
}
}  // namespace dscale::internal

#define DSCALE_CHECK(cond)                                                  \
  do {                                                                      \
    if (!(cond)) ::dscale::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define DSCALE_CHECK_MSG(cond, msg)                                            \
  do {                                                                         \
    if (!(cond)) ::dscale::internal::CheckFailed(__FILE__, __LINE__, #cond, msg); \
  } while (0)
