#include "io/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace dscale {

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool PathExists(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return true;
  return errno != ENOENT && errno != ENOTDIR;
}

Status OsError(const std::string& path, const std::string& what, int error_number) {
  std::string message = path + ": " + what + ": " + std::strerror(error_number);
  if (error_number == ENOENT) return NotFound(std::move(message));
  return IoError(std::move(message));
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = other.Release();
  }
  return *this;
}

int UniqueFd::Release() { return std::exchange(fd_, -1); }

int UniqueFd::Reset() {
  if (fd_ < 0) return 0;
  return ::close(std::exchange(fd_, -1));
}

Result<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK keeps a FIFO named by mistake from blocking here; fstat then refuses it.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return OsError(path, "cannot open", errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return OsError(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) return IoError(path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return DataLoss(path + ": file is " + std::to_string(st.st_size) + " bytes, more than the " +
                    std::to_string(max_bytes) + "-byte limit for this kind of file");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t got = ::read(fd.get(), text.data() + done, text.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return OsError(path, "cannot read", errno);
    if (got == 0) break;  // the file shrank since fstat
    done += static_cast<size_t>(got);
  }
  text.resize(done);
  return text;
}

Result<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path) {
  AtomicFileWriter writer;
  writer.path_ = path;
  // mkstemp wants a writable template ending in XXXXXX.
  std::string pattern = path + ".tmp-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  writer.fd_ = UniqueFd(::mkostemp(name.data(), O_CLOEXEC));
  if (writer.fd_.get() < 0) return OsError(path, "cannot create a temporary file", errno);
  writer.temp_path_ = name.data();
  // mkstemp creates the file 0600; checkpoints are meant to be readable like any other output.
  if (::fchmod(writer.fd_.get(), 0644) != 0) return OsError(path, "cannot chmod", errno);
  return writer;
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      temp_path_(std::exchange(other.temp_path_, std::string())),
      fd_(std::move(other.fd_)) {}

AtomicFileWriter::~AtomicFileWriter() { Abandon(); }

void AtomicFileWriter::Abandon() {
  fd_.Reset();
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

Status AtomicFileWriter::Write(const void* data, size_t size) {
  if (temp_path_.empty()) return IoError(path_ + ": write after the file was closed");
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t put = ::write(fd_.get(), bytes, size);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return OsError(path_, "cannot write", errno);
    bytes += put;
    size -= static_cast<size_t>(put);
  }
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (temp_path_.empty()) return IoError(path_ + ": commit after the file was closed");
  if (::fsync(fd_.get()) != 0) return OsError(path_, "cannot flush", errno);
  if (fd_.Reset() != 0) return OsError(path_, "cannot close", errno);
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int error_number = errno;
    Abandon();
    return OsError(path_, "cannot rename the temporary file into place", error_number);
  }
  temp_path_.clear();
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, const void* data, size_t size) {
  DSCALE_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  DSCALE_RETURN_IF_ERROR(writer.Write(data, size));
  return writer.Commit();
}

}  // namespace dscale
