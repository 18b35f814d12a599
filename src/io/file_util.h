#pragma once
// Small POSIX file helpers shared by the readers and writers in io/. Every error names the path;
// a missing file gives NotFound, any other refusal by the OS gives IoError.

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace dscale {

// "dir/name"; `name` alone when `dir` is empty.
std::string JoinPath(const std::string& dir, const std::string& name);

// False only when the path (or a directory on the way) does not exist; a path that exists but
// cannot be inspected counts as present, so that opening it reports the real error.
bool PathExists(const std::string& path);

// The status for a failed system call, built from errno: "<path>: <what>: <strerror>".
Status OsError(const std::string& path, const std::string& what, int error_number);

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  int Release();
  // Closes the descriptor; returns close()'s result (0 when there was none).
  int Reset();

 private:
  int fd_ = -1;
};

// Reads a whole regular file. DataLoss when it is larger than `max_bytes`.
Result<std::string> ReadFileToString(const std::string& path, size_t max_bytes = size_t{64} << 20);

// No size limit, for files whose size the format itself checks (predictor, traces).
inline constexpr size_t kAnyFileSize = SIZE_MAX;

// Writes a file so that readers never see it half written: bytes go to a temporary file next to
// `path`, which replaces `path` on Commit(). Dropping the writer without Commit() removes the
// temporary file.
class AtomicFileWriter {
 public:
  static Result<AtomicFileWriter> Create(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  Status Write(const void* data, size_t size);
  // Flushes to disk, then renames the temporary file onto `path`. At most once.
  Status Commit();

 private:
  AtomicFileWriter() = default;
  void Abandon();

  std::string path_;
  std::string temp_path_;  // empty once committed or abandoned
  UniqueFd fd_;
};

// `size` bytes written through an AtomicFileWriter: `path` holds either its old contents or all
// of the new ones.
Status WriteFileAtomically(const std::string& path, const void* data, size_t size);

}  // namespace dscale
