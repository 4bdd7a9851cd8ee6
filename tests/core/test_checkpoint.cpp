#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "core/util/error.hpp"
#include "tests/support/fault_env.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::FaultInjectionEnv;
using meridian::testing::TempDir;

namespace {

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// A checkpoint whose contents depend on `step`, with the edge cases of the format in it.
Checkpoint sample(std::int64_t step) {
  Checkpoint c;
  c.put_value<std::int64_t>("step", step);
  c.put("empty", {});
  c.put("one", {std::byte{0x5a}});
  std::vector<float> weights(37 + static_cast<std::size_t>(step));
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 0.25f * static_cast<float>(i) - float(step);
  c.put_pod<float>("weights", weights);
  return c;
}

void check_equal(const Checkpoint& a, const Checkpoint& b) {
  REQUIRE(a.names() == b.names());
  for (const auto& name : a.names()) {
    const auto x = a.get(name), y = b.get(name);
    CHECK_MESSAGE(std::equal(x.begin(), x.end(), y.begin(), y.end()), name);
  }
}

// Decoding must be refused with a Checkpoint error naming the source; returns the message.
std::string refusal(std::span<const std::byte> file) {
  try {
    decode_checkpoint(file, "src.mrdn");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Checkpoint);
    CHECK(contains(e.what(), "checkpoint src.mrdn: "));
    CHECK(contains(e.what(), "byte offset"));
    return e.what();
  }
  FAIL("decode accepted a damaged file");
  return {};
}

void store_le(std::vector<std::byte>& file, std::size_t at, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) file[at + i] = static_cast<std::byte>(value >> (8 * i));
}

}  // namespace

TEST_CASE("records round trip in order, including empty and one-byte payloads") {
  const Checkpoint c = sample(3);
  const auto file = encode_checkpoint(c);
  CHECK(file.size() % 8 == 0);
  const Checkpoint d = decode_checkpoint(file, "mem");
  check_equal(c, d);
  CHECK(d.names() == std::vector<std::string>{"step", "empty", "one", "weights"});
  CHECK(d.get_value<std::int64_t>("step") == 3);
  CHECK(d.get("empty").empty());
  CHECK(d.get_pod<std::uint8_t>("one") == std::vector<std::uint8_t>{0x5a});
  CHECK(d.get_pod<float>("weights").size() == 40);
  CHECK(d.get_pod<float>("weights")[39] == doctest::Approx(0.25 * 39 - 3));
  // A view is the record's own values, where they lie.
  const auto view = d.view_pod<float>("weights");
  CHECK(std::vector<float>(view.begin(), view.end()) == d.get_pod<float>("weights"));
  CHECK(static_cast<const void*>(view.data()) == static_cast<const void*>(d.get("weights").data()));
  CHECK(d.view_pod<float>("empty").empty());

  CHECK(decode_checkpoint(encode_checkpoint(Checkpoint{}), "mem").size() == 0);
}

TEST_CASE("put replaces in place, misuse and missing records are clear errors") {
  Checkpoint c = sample(1);
  c.put_value<std::int32_t>("empty", 7);
  CHECK(c.names() == std::vector<std::string>{"step", "empty", "one", "weights"});
  CHECK(c.get_value<std::int32_t>("empty") == 7);

  CHECK_THROWS_WITH_AS(c.get("nope"), doctest::Contains("no record \"nope\""), Error);
  CHECK_THROWS_WITH_AS(c.get_value<std::int64_t>("one"), doctest::Contains("\"one\" has 1 bytes, expected 8"), Error);
  CHECK_THROWS_WITH_AS(c.get_pod<double>("one"), doctest::Contains("expected a multiple of 8"), Error);
  CHECK_THROWS_WITH_AS(c.view_pod<float>("one"), doctest::Contains("expected a multiple of 4"), Error);
  CHECK_THROWS_AS(c.put("__end__", {}), Error);
  CHECK_THROWS_AS(c.put("", {}), Error);
  CHECK_THROWS_AS(c.put(std::string(Checkpoint::kMaxNameLength + 1, 'n'), {}), Error);
  CHECK_NOTHROW(c.put(std::string(Checkpoint::kMaxNameLength, 'n'), {}));
  check_equal(c, decode_checkpoint(encode_checkpoint(c), "mem"));
}

TEST_CASE("a file truncated at any offset is refused") {
  const auto file = encode_checkpoint(sample(0));
  for (std::size_t n = 0; n < file.size(); ++n) {
    CAPTURE(n);
    refusal(std::span(file).first(n));
  }
  CHECK(contains(refusal(std::span(file).first(file.size() - 8)), "truncated record"));
  CHECK(contains(refusal(std::span(file).first(8)), "too short for the 16-byte header"));
}

TEST_CASE("every single-bit flip is refused") {
  const auto good = encode_checkpoint(sample(0));
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto bad = good;
      bad[i] ^= static_cast<std::byte>(1 << bit);
      CAPTURE(i);
      CAPTURE(bit);
      refusal(bad);
    }
  }
}

TEST_CASE("damage is reported precisely") {
  const auto good = encode_checkpoint(sample(0));
  auto bad = good;
  bad[0] = std::byte{'X'};
  CHECK(contains(refusal(bad), "bad magic"));

  bad = good;
  store_le(bad, 8, 2, 4);
  CHECK(contains(refusal(bad), "unsupported format version 2 (this build reads version 1) at byte offset 8"));

  // The last record is "weights"; a flipped payload byte names it.
  bad = good;
  bad[good.size() - 60] ^= std::byte{1};
  CHECK(contains(refusal(bad), "checksum mismatch in record \"weights\""));

  bad = good;
  bad.resize(good.size() + 8);
  CHECK(contains(refusal(bad), "8 unexpected bytes after the end record"));

  // Hostile lengths in the first record header (offset 16) must not drive an allocation.
  bad = good;
  store_le(bad, 24, std::uint64_t{1} << 62, 8);
  CHECK(contains(refusal(bad), "truncated record (name 4 + payload 4611686018427387904 bytes"));
  bad = good;
  store_le(bad, 20, 1'000'000'000, 4);
  CHECK(contains(refusal(bad), "record name length 1000000000 is outside 1..4096 at byte offset 16"));
}

TEST_CASE("the end record must be present and match") {
  const Checkpoint c = sample(0);
  const auto file = encode_checkpoint(c);
  // Dropping the end record leaves a sequence of valid records, which is still not a file.
  const std::size_t end_record = 16 + 8 + 16 + 8;  // header + name "__end__" padded + payload + hash
  CHECK(contains(refusal(std::span(file).first(file.size() - end_record)), "missing end record"));

  // Splicing a record out of the middle is caught by the end record's count and hash chain.
  const auto without_one = encode_checkpoint([&] {
    Checkpoint d;
    for (const auto& name : c.names()) {
      if (name != "one") d.put(name, {c.get(name).begin(), c.get(name).end()});
    }
    return d;
  }());
  auto spliced = file;
  spliced.resize(without_one.size() - end_record);
  std::copy(without_one.begin(), without_one.end() - end_record, spliced.begin());
  spliced.insert(spliced.end(), file.end() - end_record, file.end());
  CHECK(contains(refusal(spliced), "end record counts 4 records but the file has 3"));
}

TEST_CASE("store: save, keep the last N, load the newest") {
  TempDir dir("ckpt");
  const auto root = dir / "run/checkpoints";
  CheckpointStore store(posix_env(), root, 3);
  CHECK(store.steps().empty());
  CHECK_FALSE(store.load_latest().has_value());

  for (std::int64_t step = 1; step <= 5; ++step) {
    const auto path = store.save(step * 100, sample(step));
    CHECK(posix_env().read_all(path) == encode_checkpoint(sample(step)));
  }
  CHECK(store.steps() == std::vector<std::int64_t>{300, 400, 500});
  CHECK(posix_env().list_dir(root) ==
        std::vector<std::string>{"ckpt-0000000300.mrdn", "ckpt-0000000400.mrdn", "ckpt-0000000500.mrdn"});

  std::vector<std::string> warnings;
  const auto loaded = store.load_latest([&](const std::string& w) { warnings.push_back(w); });
  REQUIRE(loaded.has_value());
  CHECK(loaded->step == 500);
  CHECK(loaded->path == root / "ckpt-0000000500.mrdn");
  check_equal(loaded->checkpoint, sample(5));
  CHECK(warnings.empty());

  // A rollback: the file just saved stays even though it is older than the ones kept.
  store.save(250, sample(2));
  CHECK(store.steps() == std::vector<std::int64_t>{250, 400, 500});

  CHECK_THROWS_AS(store.save(-1, sample(0)), Error);
  CHECK_THROWS_AS(store.save(10'000'000'000, sample(0)), Error);
  CHECK_THROWS_AS(CheckpointStore(posix_env(), root, 0), Error);
}

TEST_CASE("store: falls back past corrupt or truncated checkpoints and says why") {
  TempDir dir("ckpt");
  CheckpointStore store(posix_env(), dir.path(), 5);
  for (std::int64_t step = 1; step <= 3; ++step) store.save(step, sample(step));

  const auto newest = dir / "ckpt-0000000003.mrdn";
  auto bytes = posix_env().read_all(newest);
  bytes[bytes.size() / 2] ^= std::byte{0x10};
  posix_env().create(newest)->append(bytes);
  const auto middle = dir / "ckpt-0000000002.mrdn";
  bytes = posix_env().read_all(middle);
  bytes.resize(bytes.size() - 20);
  posix_env().create(middle)->append(bytes);
  posix_env().create(dir / "notes.txt")->append(bytes);  // not ours: ignored silently

  std::vector<std::string> warnings;
  const auto loaded = store.load_latest([&](const std::string& w) { warnings.push_back(w); });
  REQUIRE(loaded.has_value());
  CHECK(loaded->step == 1);
  check_equal(loaded->checkpoint, sample(1));
  REQUIRE(warnings.size() == 2);
  CHECK(contains(warnings[0], newest.string()));
  CHECK(contains(warnings[0], "checksum mismatch"));
  CHECK(contains(warnings[1], middle.string()));
  CHECK(contains(warnings[1], "truncated"));

  posix_env().create(dir / "ckpt-0000000001.mrdn")->append(std::vector<std::byte>(40));
  CHECK_FALSE(store.load_latest().has_value());
}

TEST_CASE("store: a leftover .tmp is reported, never loaded, and cleaned by the next save") {
  TempDir dir("ckpt");
  CheckpointStore store(posix_env(), dir.path(), 2);
  store.save(1, sample(1));
  const auto tmp = dir / "ckpt-0000000009.mrdn.tmp";
  posix_env().create(tmp)->append(encode_checkpoint(sample(9)));  // even a complete one

  std::vector<std::string> warnings;
  const auto loaded = store.load_latest([&](const std::string& w) { warnings.push_back(w); });
  REQUIRE(loaded.has_value());
  CHECK(loaded->step == 1);
  REQUIRE(warnings.size() == 1);
  CHECK(contains(warnings[0], tmp.string()));
  CHECK(contains(warnings[0], "unfinished"));
  CHECK(store.steps() == std::vector<std::int64_t>{1});

  store.save(2, sample(2));
  CHECK_FALSE(posix_env().exists(tmp));
}

namespace {

enum class Breakage { None, NoFileSync, NoDirSync };

struct CrashOutcome {
  bool save_returned = false;
  std::optional<std::int64_t> loaded_step;
  std::vector<std::string> warnings;
  std::vector<std::string> save_ops;  // the operations of the interrupted save, for diagnosis
};

// Saves steps 1 and 2, then step 3 with its operation `fail_op` failing (the process dies there;
// -1: it completes), then loses power, restarts on the real disk and loads.
CrashOutcome crash_during_save(std::int64_t fail_op, int keep_last, Breakage breakage = Breakage::None) {
  TempDir dir("crash");
  const auto root = dir / "ckpt";
  FaultInjectionEnv env(dir.path());
  CheckpointStore store(env, root, keep_last);
  store.save(1, sample(1));
  store.save(2, sample(2));

  env.ignore_file_syncs(breakage == Breakage::NoFileSync);
  env.ignore_dir_syncs(breakage == Breakage::NoDirSync);
  const std::int64_t first = env.op_count();
  if (fail_op >= 0) env.fail_at(first + fail_op);
  CrashOutcome out;
  try {
    store.save(3, sample(3));
    out.save_returned = true;
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Io);
    CHECK(contains(e.what(), "injected failure"));
  }
  out.save_ops.assign(env.op_log().begin() + first, env.op_log().end());
  env.crash();

  CheckpointStore restarted(posix_env(), root, keep_last);
  const auto loaded = restarted.load_latest([&](const std::string& w) { out.warnings.push_back(w); });
  if (loaded) {
    out.loaded_step = loaded->step;
    check_equal(loaded->checkpoint, sample(loaded->step));
  }
  // Whatever the crash left behind, the restarted process saves and loads normally.
  restarted.save(4, sample(4));
  std::vector<std::string> later_warnings;
  CHECK(restarted.load_latest([&](const std::string& w) { later_warnings.push_back(w); })->step == 4);
  CHECK(later_warnings.empty());
  return out;
}

}  // namespace

TEST_CASE("crash at every operation of a save: the previous or the new checkpoint survives") {
  for (const int keep_last : {1, 2, 5}) {
    CAPTURE(keep_last);
    const CrashOutcome full = crash_during_save(-1, keep_last);
    REQUIRE(full.save_returned);
    REQUIRE(full.loaded_step == 3);
    const auto& ops = full.save_ops;
    // The new checkpoint is durable once the directory is synced after the rename.
    const auto rename = std::find_if(ops.begin(), ops.end(), [](const auto& op) { return contains(op, "rename"); });
    const auto dir_synced = std::find_if(rename, ops.end(), [](const auto& op) { return contains(op, "sync_dir"); });
    REQUIRE(dir_synced != ops.end());
    const auto durable_at = static_cast<std::size_t>(dir_synced - ops.begin());

    for (std::size_t k = 0; k < ops.size(); ++k) {
      CAPTURE(k);
      CAPTURE(ops[k]);
      const CrashOutcome out = crash_during_save(static_cast<std::int64_t>(k), keep_last);
      CHECK_FALSE(out.save_returned);
      REQUIRE(out.loaded_step.has_value());
      CHECK((*out.loaded_step == 2 || *out.loaded_step == 3));
      if (k > durable_at) CHECK(*out.loaded_step == 3);
      // A half-written file is never visible under a checkpoint name; at most a .tmp is left.
      for (const auto& w : out.warnings) CHECK_MESSAGE(contains(w, ".tmp"), w);
    }
  }
}

TEST_CASE("without its syncs a save loses data, so the crash test above can fail") {
  // No fsync of the file: the rename and the removal of step 2 are durable, the new bytes are not.
  const CrashOutcome no_fsync = crash_during_save(-1, 1, Breakage::NoFileSync);
  CHECK(no_fsync.save_returned);
  CHECK_FALSE(no_fsync.loaded_step.has_value());
  REQUIRE(no_fsync.warnings.size() == 1);
  CHECK(contains(no_fsync.warnings[0], "ckpt-0000000003.mrdn"));

  // No sync of the directory: the rename is undone, so a save that returned is gone.
  const CrashOutcome no_dir_sync = crash_during_save(-1, 1, Breakage::NoDirSync);
  CHECK(no_dir_sync.save_returned);
  CHECK(no_dir_sync.loaded_step == 2);
}
