#include "io/byte_buffer.h"

#include <bit>
#include <cstring>

namespace dscale {

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

}  // namespace dscale
