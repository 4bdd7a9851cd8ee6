// DiLoCo's outer settings a job file leaves out, derived from its shape; a setting wins.
#include <doctest/doctest.h>

#include "core/config/outer_defaults.hpp"
#include "crosssite/codec/codec.hpp"
#include "tests/support/config_files.hpp"

using namespace meridian;
using namespace meridian::testing;
namespace fs = std::filesystem;

TEST_CASE("DiLoCo's outer lr and momentum follow the sites when the file leaves them out, a setting wins") {
  TempDir dir("config");
  const auto sites = [](int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += "[[site]]\nname = \"s" + std::to_string(i) + "\"\n";
    return out;
  };
  const JobConfig three = load_ok(write(dir / "three.toml", kData + sites(3)));
  CHECK(three.outer.lr == outer_defaults(3, 50).lr);
  CHECK(three.outer.momentum == outer_defaults(3, 50).momentum);
  CHECK(three.outer.momentum_warmup == outer_defaults(3, 50).momentum_warmup);
  // The ramp spans the job's first kMomentumWarmupInnerSteps inner steps, whatever H.
  CHECK(outer_defaults(3, 50).momentum_warmup == 5);
  CHECK(outer_defaults(3, 100).momentum_warmup == 3);
  CHECK(outer_defaults(3, 20).momentum_warmup == 13);
  // The outer lr steps up between H = 35 and H = 40, where the demo-length sweeps put it.
  CHECK(outer_defaults(3, 40).lr == outer_defaults(3, 50).lr);
  CHECK(outer_defaults(3, 25).lr < outer_defaults(3, 40).lr);
  CHECK(outer_defaults(3, 35).lr == outer_defaults(3, 25).lr);
  // ... shorter early rounds counted as they come: 250 steps of H = 25, or 100 of 25 and 150 of 50.
  CHECK(outer_defaults(3, 50, false, 25, 500).momentum_warmup == 10);
  CHECK(outer_defaults(3, 50, false, 25, 100).momentum_warmup == 7);
  const JobConfig early =
      load_ok(write(dir / "early.toml", kData + "[outer]\nearly_inner_steps = 25\nearly_steps = 500\n" + sites(3)));
  CHECK((early.outer.early_inner_steps == 25 && early.outer.early_steps == 500 && early.outer.momentum_warmup == 10));
  CHECK(early.outer.lr == outer_defaults(3, 25).lr);  // its first rounds' H decides it
  CHECK(early.derived[0].find("(3 sites, H = 50 after 500 steps of H = 25)") != std::string::npos);
  JobConfig again = load_ok(write(dir / "early-again.toml", to_toml(early)));  // as `meridian validate` prints it
  again.source = early.source;
  again.derived = early.derived;
  CHECK(again == early);
  REQUIRE(three.derived.size() == 4);
  CHECK(three.derived[0].starts_with("outer.lr = "));
  CHECK(three.derived[0].find("(3 sites, H = 50)") != std::string::npos);
  CHECK(three.derived[2].starts_with("outer.momentum_warmup = "));
  CHECK(three.derived[3].starts_with("outer.overlap_steps = 5 "));
  const JobConfig eight = load_ok(write(dir / "eight.toml", kData + sites(8)));
  CHECK(eight.outer.lr > three.outer.lr);  // more sites, a less noisy mean: a longer step along it
  const JobConfig set =
      load_ok(write(dir / "set.toml", kData + "[outer]\nlr = 0.25\nmomentum_warmup = 0\n" + sites(3)));
  CHECK(set.outer.lr == 0.25);
  CHECK(set.outer.momentum_warmup == 0);
  REQUIRE(set.derived.size() == 2);
  CHECK(set.derived[0].starts_with("outer.momentum = "));
  CHECK(load_ok(write(dir / "cli.toml", kData + sites(3)), {"outer.lr=0.3"}).outer.lr == 0.3);
  const JobConfig sync = load_ok(write(dir / "sync.toml", kData + "[outer]\nalgorithm = \"sync\"\n" + sites(3)));
  CHECK(sync.derived.empty());
  CHECK(load_ok(write(dir / "one.toml", kData)).derived.empty());
  CHECK(load_ok(write(dir / "muon.toml", kData + "[inner]\noptimizer = \"muon\"\nmuon_momentum = 0.9\n"))
            .inner.muon_momentum == 0.9);
}

TEST_CASE("a sparse job's density follows its byte budget and its outer lr the codec, a setting wins") {
  TempDir dir("config");
  const std::string sites = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n[[site]]\nname = \"c\"\n";
  const std::string sparse = "[outer]\ncodec = \"sparse\"\n";
  const JobConfig derived = load_ok(write(dir / "sparse.toml", kData + sparse + sites));
  const int keep = sparse_keep_within(512, kSparseBytesPerValue);
  CHECK(derived.outer.sparse_keep() == keep);
  CHECK(derived.outer.density == doctest::Approx(keep / 512.0));
  CHECK(derived.outer.lr == outer_defaults(3, 50, true).lr);
  CHECK(derived.outer.lr > outer_defaults(3, 50).lr);
  bool noted = false;
  for (const auto& line : derived.derived)
    noted = noted || (line.starts_with("outer.density = ") && line.find("0.1 byte") != std::string::npos);
  CHECK(noted);
  // Another block, another keep; the budget holds at both.
  const JobConfig wide = load_ok(write(dir / "wide.toml", kData + sparse + "block = 4096\n" + sites));
  CHECK(wide.outer.sparse_keep() == sparse_keep_within(4096, kSparseBytesPerValue));
  const JobConfig set = load_ok(write(dir / "set.toml", kData + sparse + "density = 0.03\nlr = 0.7\n" + sites));
  CHECK(set.outer.density == 0.03);
  CHECK(set.outer.lr == 0.7);
  for (const auto& line : set.derived) CHECK_FALSE(line.starts_with("outer.density"));
  CHECK(load_ok(write(dir / "int8.toml", kData + sites)).outer.density == JobConfig{}.outer.density);
}

TEST_CASE("the overlap's bound follows H when the file leaves it out, a setting wins, lockstep derives none") {
  TempDir dir("config");
  const std::string sites = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n";
  CHECK(load_ok(write(dir / "h50.toml", kData + sites)).outer.overlap_steps == 5);
  CHECK(load_ok(write(dir / "h8.toml", kData + "[outer]\ninner_steps = 8\n" + sites)).outer.overlap_steps == 1);
  CHECK(load_ok(write(dir / "h200.toml", kData + "[outer]\ninner_steps = 200\n" + sites)).outer.overlap_steps == 20);
  CHECK(load_ok(write(dir / "set.toml", kData + "[outer]\noverlap_steps = 50\n" + sites)).outer.overlap_steps == 50);
  CHECK(load_ok(write(dir / "cli.toml", kData + sites), {"outer.overlap_steps=2"}).outer.overlap_steps == 2);
  const JobConfig lockstep = load_ok(write(dir / "lockstep.toml", kData + "[outer]\noverlap = false\n" + sites));
  for (const auto& line : lockstep.derived) CHECK_FALSE(line.starts_with("outer.overlap_steps"));
  CHECK(only_problem(dir, kData + "[outer]\noverlap_steps = 0\n" + sites).find("outer.overlap_steps") !=
        std::string::npos);
}
