#pragma once
// Helpers for the io tests: a scratch directory per test, raw file access, hand-built files.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace dscale::testing_io {

// A fresh directory for the current test, removed with everything in it on destruction. The
// process id keeps parallel test processes apart.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "dscale_io_" + std::to_string(::getpid());
    if (info != nullptr) name += std::string("_") + info->test_suite_name() + "_" + info->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = (std::filesystem::path(::testing::TempDir()) / name).string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Replaces the file at `path`. Removing it first, rather than truncating it, matters for speed:
// ext4 flushes a file rewritten after truncation to disk on close, and the corruption tests
// rewrite the same path thousands of times.
inline void WriteBytes(const std::string& path, std::string_view bytes) {
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The u64 little-endian length prefix the format starts with.
inline std::string LengthPrefix(uint64_t length) {
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &length, 8);
  return bytes;
}

// A file with `header` as its JSON and `data_size` zero bytes of data.
inline std::string SafetensorsBytes(std::string_view header, size_t data_size) {
  return LengthPrefix(header.size()) + std::string(header) + std::string(data_size, '\0');
}

}  // namespace dscale::testing_io
