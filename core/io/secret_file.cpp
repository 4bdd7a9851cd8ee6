#include "core/io/secret_file.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/util/error.hpp"

namespace meridian {

std::string random_secret() {
  unsigned char bytes[32];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
    throw make_error(ErrorKind::Io, "no random bytes from the kernel for a secret: ", std::strerror(errno));
  std::string hex;
  for (const unsigned char b : bytes) {
    char digits[3];
    std::snprintf(digits, sizeof digits, "%02x", b);
    hex += digits;
  }
  return hex;
}

void write_secret_file(const std::filesystem::path& path, const std::string& secret) {
  // Written beside it and renamed over it: a reader (a replica started at the same time) sees the
  // whole secret or none, never an empty file.
  const std::filesystem::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw make_error(ErrorKind::Io, "cannot write secret file ", path.string(), ": ", std::strerror(errno));
  // fchmod: a file that was there before keeps its old mode through open().
  bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  int error = errno;
  ::close(fd);
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) ok = false, error = errno;
  if (!ok) throw make_error(ErrorKind::Io, "cannot write secret file ", path.string(), ": ", std::strerror(error));
}

std::string read_secret_file(const std::filesystem::path& path, const std::string& what) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0)
    throw make_error(ErrorKind::Config, what, " file ", path.string(), ": ", std::strerror(errno));
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw make_error(ErrorKind::Config, what, " file ", path.string(), " is open to other users (mode ", mode,
                     "): a secret must be readable by its owner only (chmod 600 ", path.string(), ")");
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::string secret = text.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (!in || secret.empty()) throw make_error(ErrorKind::Config, what, " file ", path.string(), " is empty or unreadable");
  return secret;
}

void make_private_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || ::chmod(dir.c_str(), 0700) != 0)
    throw make_error(ErrorKind::Io, "cannot make key directory ", dir.string(), ": ", ec ? ec.message() : std::strerror(errno));
}

}  // namespace meridian
