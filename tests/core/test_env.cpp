#include <doctest/doctest.h>

#include <string>

#include "core/io/env.hpp"
#include "core/util/error.hpp"
#include "tests/support/fault_env.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::FaultInjectionEnv;
using meridian::testing::TempDir;

namespace {

std::vector<std::byte> bytes(std::string_view s) {
  const auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

std::string text(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

void write_file(Env& env, const std::filesystem::path& path, std::string_view content, bool sync) {
  auto f = env.create(path);
  f->append(bytes(content));
  if (sync) f->sync();
  f->close();
}

}  // namespace

TEST_CASE("posix env: write, read, rename, remove, list") {
  TempDir dir("env");
  Env& env = posix_env();
  const auto a = dir / "a", b = dir / "b";

  std::string big(200'000, 'x');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 23);
  auto f = env.create(a);
  f->append(bytes("head:"));
  f->append(bytes(big));  // larger than the write buffer
  f->append(bytes(":tail"));
  f->sync();
  f->close();
  CHECK(text(env.read_all(a)) == "head:" + big + ":tail");

  write_file(env, b, "bee", true);
  CHECK(env.list_dir(dir.path()) == std::vector<std::string>{"a", "b"});
  env.rename(b, a);  // replaces
  CHECK(text(env.read_all(a)) == "bee");
  CHECK_FALSE(env.exists(b));
  env.sync_dir(dir.path());
  env.remove(a);
  CHECK(env.list_dir(dir.path()).empty());

  write_file(env, a, "", false);
  CHECK(env.read_all(a).empty());
  write_file(env, a, "again", false);  // create truncates
  CHECK(text(env.read_all(a)) == "again");

  env.create_dirs(dir / "x/y/z/");
  CHECK(env.exists(dir / "x/y/z"));
  env.create_dirs(dir / "x/y/z");  // already there
}

TEST_CASE("posix env: failures are Io errors naming the path and the reason") {
  TempDir dir("env");
  const auto missing = dir / "missing";
  for (const auto& op : {0, 1, 2, 3}) {
    try {
      if (op == 0) posix_env().read_all(missing);
      if (op == 1) posix_env().remove(missing);
      if (op == 2) posix_env().rename(missing, dir / "b");
      if (op == 3) posix_env().create(dir / "no/such/dir/file");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Io);
      CHECK(std::string(e.what()).find(dir.path().string()) != std::string::npos);
      CHECK(std::string(e.what()).find("No such file") != std::string::npos);
    }
  }
}

TEST_CASE("fault env: a crash drops the unsynced tail of a file") {
  TempDir dir("fenv");
  FaultInjectionEnv env(dir.path());
  auto f = env.create(dir / "f");
  env.sync_dir(dir.path());
  f->append(bytes("abc"));
  f->sync();
  f->append(bytes("def"));
  env.crash();
  CHECK(text(posix_env().read_all(dir / "f")) == "abc");
  CHECK_THROWS_AS(f->append(bytes("x")), Error);  // the handle died with the "process"
}

TEST_CASE("fault env: unsynced directory operations are undone") {
  TempDir dir("fenv");
  write_file(posix_env(), dir / "old", "old", true);
  write_file(posix_env(), dir / "keep", "keep", true);
  FaultInjectionEnv env(dir.path());

  write_file(env, dir / "new", "synced content, unsynced name", true);
  env.rename(dir / "old", dir / "keep");
  CHECK(text(env.read_all(dir / "keep")) == "old");
  env.crash();
  CHECK_FALSE(posix_env().exists(dir / "new"));
  CHECK(text(posix_env().read_all(dir / "old")) == "old");
  CHECK(text(posix_env().read_all(dir / "keep")) == "keep");

  env.remove(dir / "keep");
  env.crash();
  CHECK(text(posix_env().read_all(dir / "keep")) == "keep");

  env.rename(dir / "old", dir / "keep");
  env.remove(dir / "keep");
  write_file(env, dir / "new", "new", true);
  env.sync_dir(dir.path());
  env.crash();
  CHECK(posix_env().list_dir(dir.path()) == std::vector<std::string>{"new"});
  CHECK(text(posix_env().read_all(dir / "new")) == "new");
}

TEST_CASE("fault env: create over an existing file keeps its synced bytes until the next sync") {
  TempDir dir("fenv");
  write_file(posix_env(), dir / "f", "durable", true);
  FaultInjectionEnv env(dir.path());
  write_file(env, dir / "f", "rewritten, never synced", false);
  env.crash();
  CHECK(text(posix_env().read_all(dir / "f")) == "durable");
}

TEST_CASE("fault env: fail_at stops the process at one operation and every later one") {
  TempDir dir("fenv");
  FaultInjectionEnv env(dir.path());
  write_file(env, dir / "f", "x", true);  // create, append, sync, close = ops 0..3
  CHECK(env.op_count() == 4);
  env.fail_at(5);
  auto g = env.create(dir / "g");  // op 4
  CHECK_THROWS_AS(g->append(bytes("y")), Error);
  CHECK_THROWS_AS(env.sync_dir(dir.path()), Error);
  CHECK_THROWS_AS(env.exists(dir / "f"), Error);
  CHECK(env.op_log().back().find("sync_dir") != std::string::npos);
  env.crash();
  CHECK(posix_env().list_dir(dir.path()).empty());
  CHECK_NOTHROW(write_file(env, dir / "f", "works again", true));
}

TEST_CASE("fault env: ignored syncs really lose data") {
  TempDir dir("fenv");
  FaultInjectionEnv env(dir.path());
  env.ignore_file_syncs(true);
  write_file(env, dir / "f", "content", true);
  env.sync_dir(dir.path());
  env.crash();
  CHECK(posix_env().read_all(dir / "f").empty());

  env.ignore_file_syncs(false);
  env.ignore_dir_syncs(true);
  write_file(env, dir / "g", "content", true);
  env.sync_dir(dir.path());
  env.crash();
  CHECK_FALSE(posix_env().exists(dir / "g"));
}
