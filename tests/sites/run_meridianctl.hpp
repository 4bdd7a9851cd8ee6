#pragma once
// meridianctl against one site of a job file, as an operator runs it, bounded in time. `token`:
// the MERIDIAN_OPS_TOKEN it sees, "" for none, so that a test's own environment never leaks in.
// For test targets that define MERIDIANCTL_BIN.
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/run_process.hpp"

namespace meridian::testing {

inline ProcessResult run_meridianctl(const std::filesystem::path& job, const std::string& site,
                                     const std::vector<std::string>& args, const std::string& token = "") {
  std::vector<std::string> argv = {MERIDIANCTL_BIN, "--config", job.string(), "--site", site};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions o;
  o.timeout = std::chrono::seconds(30);
  std::string env = "MERIDIAN_OPS_TOKEN=";
  env += token;  // not "..." + token: GCC 12 warns falsely (-Wrestrict) on that form
  o.env = {env};
  return run_process(argv, o);
}

}  // namespace meridian::testing
