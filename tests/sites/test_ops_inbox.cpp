// The replica group's operator inbox: commands applied in the order filed, and where a group that
// (re)forms goes on from. A command filed while the group re-forms (a replica was evicted and is
// coming back) is applied by the new group, not skipped as if the old one had applied it; a group
// of fresh replicas does not replay what was filed before it existed.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/io/env.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/trainer.hpp"
#include "sites/replica/ops_inbox.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/protocol.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_job.hpp"

using namespace meridian;
using namespace meridian::testing;

namespace {

void file(Store& store, const std::string& text) {
  const auto n = store.add(site_keys::ops_commands(), 0) + 1;
  store.set(site_keys::ops_command(n), std::as_bytes(std::span(text.data(), text.size())));
  store.add(site_keys::ops_commands(), 1);
}

}  // namespace

TEST_CASE("resume_after: a member that was in a group knows what was applied, fresh replicas start after the filed") {
  using A = std::vector<std::optional<std::int64_t>>;
  CHECK(OpsInbox::resume_after({std::nullopt, std::nullopt}, 4) == 4);  // a fresh group: nothing replayed
  CHECK(OpsInbox::resume_after({3, std::nullopt}, 4) == 3);             // a survivor and a restarted replica
  CHECK(OpsInbox::resume_after(A{std::nullopt, 3}, 4) == 3);            // whichever rank the survivor has
  CHECK(OpsInbox::resume_after({3, 3}, 3) == 3);
  CHECK(OpsInbox::resume_after({0, std::nullopt}, 2) == 0);  // a survivor that applied none: both are applied
}

TEST_CASE("a drain filed while the group re-forms is applied by the new group") {
  TempDir dir("inbox");
  const auto config = tiny_job(dir, "run");
  RunLog log(config.job.run_dir);
  Trainer trainer(config, posix_env(), log, nullptr, fake_clock);
  MemoryStore store;
  std::vector<std::string> modes;
  const auto on_mode = [&](const std::string& kind, nlohmann::json&) { modes.push_back(kind); };

  // Generation 0: replica 0 applies set-lr; replica 1 is then evicted and restarted.
  OpsInbox survivor(store, posix_env(), on_mode);
  survivor.skip_to(OpsInbox::resume_after({survivor.applied(), std::nullopt}, 0));
  file(store, R"({"command":"set-lr","scale":0.5})");
  auto done = survivor.apply(static_cast<std::int64_t>(survivor.newest(true)), trainer, true);
  REQUIRE(done.done.size() == 1);
  CHECK(done.done[0]["scale"] == 0.5);
  CHECK(survivor.applied() == 1);

  // The operator drains while the group re-forms; the new group agrees where to go on from.
  file(store, R"({"command":"drain"})");
  OpsInbox restarted(store, posix_env(), on_mode);
  CHECK_FALSE(restarted.applied().has_value());
  const auto filed = static_cast<std::int64_t>(survivor.newest(true));
  CHECK(filed == 2);
  const auto from = OpsInbox::resume_after({survivor.applied(), restarted.applied()}, filed);
  survivor.skip_to(from);
  restarted.skip_to(from);
  for (auto* inbox : {&survivor, &restarted}) {
    done = inbox->apply(filed, trainer, inbox == &survivor);
    REQUIRE(done.done.size() == 1);
    CHECK(done.done[0]["command"] == "drain");
  }
  CHECK(modes == std::vector<std::string>{"drain", "drain"});
}
