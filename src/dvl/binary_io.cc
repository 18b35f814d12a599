#include "dvl/binary_io.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

namespace dscale::dvl {

static_assert(std::endian::native == std::endian::little,
              "dscale binary files are little-endian; a big-endian host needs byte swaps here");

void ByteReader::Bytes(void* out, size_t n) {
  DSCALE_CHECK_MSG(n <= remaining(), "read past the end of a buffer whose size was checked");
  std::memcpy(out, bytes_.data() + pos_, n);
  pos_ += n;
}

uint8_t ByteReader::U8() {
  uint8_t v = 0;
  Bytes(&v, 1);
  return v;
}

uint32_t ByteReader::U32() {
  uint32_t v = 0;
  Bytes(&v, sizeof(v));
  return v;
}

uint64_t ByteReader::U64() {
  uint64_t v = 0;
  Bytes(&v, sizeof(v));
  return v;
}

void ByteWriter::Bytes(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  bytes_.insert(bytes_.end(), p, p + n);
}

namespace {
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;
}  // namespace

Result<std::vector<char>> ReadWholeFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFound(path + ": no such file");
  }
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) return IoError(path + ": cannot open: " + std::strerror(errno));
  std::vector<char> bytes;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec) bytes.reserve(static_cast<size_t>(size));
  char chunk[1 << 16];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof(chunk), f.get())) > 0) {
    bytes.insert(bytes.end(), chunk, chunk + got);
  }
  if (std::ferror(f.get())) return IoError(path + ": read failed");
  return bytes;
}

Status WriteWholeFile(const std::string& path, std::span<const char> bytes) {
  const std::string tmp = path + ".tmp";
  {
    FilePtr f(std::fopen(tmp.c_str(), "wb"));
    if (!f) return IoError(tmp + ": cannot create: " + std::strerror(errno));
    if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size() ||
        std::fflush(f.get()) != 0) {
      return IoError(tmp + ": write failed: " + std::strerror(errno));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return IoError(path + ": cannot rename from " + tmp + ": " + ec.message());
  return Status::Ok();
}

}  // namespace dscale::dvl
