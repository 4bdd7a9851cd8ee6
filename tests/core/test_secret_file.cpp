// Secret files: written for their owner only, read back, and refused when others could read them.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/io/secret_file.hpp"
#include "core/util/error.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

unsigned mode_of(const fs::path& path) {
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::string refusal(const fs::path& path) {
  return meridian::testing::error_of(ErrorKind::Config, [&] { read_secret_file(path, "the test token"); });
}

}  // namespace

TEST_CASE("random secrets: 64 hex digits, a new one each time") {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string s = random_secret();
    CHECK(s.size() == 64);
    CHECK(s.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(seen.insert(s).second);
  }
}

TEST_CASE("a secret file is its owner's only, also when it was there before, and reads back without its newline") {
  TempDir dir("secret");
  const auto path = dir.path() / "token";
  std::ofstream(path) << "old and open";
  fs::permissions(path, fs::perms::all);
  write_secret_file(path, "s3cret");
  CHECK(mode_of(path) == 0600);
  CHECK(read_secret_file(path, "the test token") == "s3cret");
  std::ofstream(path) << "typed by hand\n";
  CHECK(read_secret_file(path, "the test token") == "typed by hand");
}

TEST_CASE("a secret file that is missing, empty, or open to other users is refused, saying how to fix it") {
  TempDir dir("secret");
  CHECK(refusal(dir.path() / "none").find("the test token file " + (dir.path() / "none").string()) != std::string::npos);
  const auto empty = dir.path() / "empty";
  write_secret_file(empty, "");
  CHECK(refusal(empty).find("is empty") != std::string::npos);
  const auto open = dir.path() / "open";
  write_secret_file(open, "s3cret");
  for (const auto& [perm, mode] : {std::pair{fs::perms::group_read, "0640"}, std::pair{fs::perms::others_write, "0602"}}) {
    fs::permissions(open, fs::perms::owner_read | fs::perms::owner_write | perm, fs::perm_options::replace);
    const std::string why = refusal(open);
    CHECK(why.find(std::string("is open to other users (mode ") + mode + ")") != std::string::npos);
    CHECK(why.find("chmod 600 " + open.string()) != std::string::npos);
  }
}
