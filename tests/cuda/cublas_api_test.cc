// cuBLAS is opened on first use, not linked (kernels/cuda/cublas_api.h). Where the toolkit this
// build was made with is installed, every entry point resolves, with or without a device, and a
// call that needs no device answers; until the first use no cuBLAS library is mapped.

#include "kernels/cuda/cublas_api.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace dscale {
namespace {

bool MapsCublas() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find("libcublas") != std::string::npos;
}

// Each test runs in a process of its own (gtest_discover_tests), so this is the first use.
TEST(CublasApiTest, LoadsOnFirstUseAndResolvesEveryEntryPointWithoutADevice) {
  EXPECT_FALSE(MapsCublas()) << "a cuBLAS library was mapped before its first use";
  ASSERT_EQ(cuda::CublasUnavailableReason(), "");
  EXPECT_TRUE(MapsCublas());
  const cuda::CublasApi& api = cuda::Cublas();
  EXPECT_NE(api.create, nullptr);
  EXPECT_NE(api.destroy, nullptr);
  EXPECT_NE(api.set_stream, nullptr);
  EXPECT_NE(api.set_workspace, nullptr);
  EXPECT_NE(api.set_pointer_mode, nullptr);
  EXPECT_NE(api.sgemm, nullptr);
  EXPECT_NE(api.gemm_ex, nullptr);
  ASSERT_NE(api.status_string, nullptr);
  // Its words ("success", "the library was not initialized" in cuBLAS 13) are its own to change.
  const std::string success = api.status_string(CUBLAS_STATUS_SUCCESS);
  const std::string not_initialized = api.status_string(CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_FALSE(success.empty());
  EXPECT_FALSE(not_initialized.empty());
  EXPECT_NE(success, not_initialized);
}

}  // namespace
}  // namespace dscale
