#pragma once
// Runs the `meridian` program of this build (MERIDIAN_BIN, a compile definition of the test) with
// `args` from `cwd`, within a minute. One OpenMP thread unless said: the models of the tests are
// tiny, and spinning threads of a child and of other work on a busy machine only slow each other down.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/run_process.hpp"

namespace meridian::testing {

inline ProcessResult run_meridian(const std::vector<std::string>& args, const std::filesystem::path& cwd = {},
                                  int threads = 1) {
  std::vector<std::string> argv{MERIDIAN_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions options;
  options.cwd = cwd;
  options.timeout = std::chrono::seconds(60);
  options.env = {"OMP_NUM_THREADS=" + std::to_string(threads)};
  auto r = run_process(argv, options);
  REQUIRE_MESSAGE(!r.timed_out, r.describe());
  return r;
}

}  // namespace meridian::testing
