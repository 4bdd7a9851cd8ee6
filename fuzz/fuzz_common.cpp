#include "fuzz/fuzz_common.hpp"

#include <unistd.h>

#include <fstream>
#include <system_error>

namespace meridian::fuzz {
namespace {

std::filesystem::path own_dir() {
  std::error_code ec;
  std::filesystem::path base = "/dev/shm";
  if (!std::filesystem::is_directory(base, ec)) base = std::filesystem::temp_directory_path();
  auto dir = base / ("meridian-fuzz-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TempFile::TempFile(std::string_view name, std::span<const std::byte> bytes) : path_(own_dir() / name) {
  write(bytes);
}

TempFile::~TempFile() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  std::filesystem::remove(path_.parent_path(), ec);  // only when empty: another TempFile may be alive
}

void TempFile::write(std::span<const std::byte> bytes) const {
  std::ofstream out(path_, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("fuzz: cannot write " + path_.string());
}

}  // namespace meridian::fuzz
