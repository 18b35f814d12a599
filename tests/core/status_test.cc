#include "core/status.h"

#include <gtest/gtest.h>

#include <string>

namespace dscale {
namespace {

Result<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgument("x must be positive, got " + std::to_string(x));
  return x;
}

Result<int> Doubled(int x) {
  DSCALE_ASSIGN_OR_RETURN(int v, ParsePositive(x));
  return 2 * v;
}

Status CheckBoth(int a, int b) {
  DSCALE_RETURN_IF_ERROR(ParsePositive(a).status().WithContext("a"));
  DSCALE_RETURN_IF_ERROR(ParsePositive(b).status().WithContext("b"));
  return Status::Ok();
}

TEST(StatusTest, PropagatesValuesAndErrors) {
  EXPECT_EQ(Doubled(4).value(), 8);
  const Result<int> bad = Doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "x must be positive, got -1");
}

TEST(StatusTest, WithContextPrefixesAndKeepsCode) {
  const Status s = CheckBoth(1, 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "b: x must be positive, got 0");
  EXPECT_TRUE(CheckBoth(1, 2).ok());
  EXPECT_TRUE(Status::Ok().WithContext("ignored").ok());
}

}  // namespace
}  // namespace dscale
