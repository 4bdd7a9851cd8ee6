// Job files written for a test, loaded, and their problems as text: what every config test does.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include "core/config/job_config.hpp"
#include "tests/support/temp_dir.hpp"

namespace meridian::testing {

inline std::filesystem::path write(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
  return file;
}

inline JobConfig load_ok(const std::filesystem::path& file, const std::vector<std::string>& overrides = {}) {
  auto result = try_load_job_config(file, overrides);
  if (auto* problems = std::get_if<std::vector<ConfigProblem>>(&result)) {
    for (const auto& p : *problems) MESSAGE(p.to_string());
    FAIL("expected the config to load");
  }
  return std::get<JobConfig>(result);
}

inline std::vector<std::string> problems_of(const std::filesystem::path& file,
                                            const std::vector<std::string>& overrides = {}) {
  auto result = try_load_job_config(file, overrides);
  REQUIRE_MESSAGE(std::holds_alternative<std::vector<ConfigProblem>>(result), "expected problems");
  std::vector<std::string> lines;
  for (const auto& p : std::get<std::vector<ConfigProblem>>(result)) lines.push_back(p.to_string());
  return lines;
}

// The single problem of a job with the given extra body, as text.
inline std::string only_problem(const TempDir& dir, const std::string& body,
                                const std::vector<std::string>& overrides = {}) {
  const auto lines = problems_of(write(dir / "job.toml", body), overrides);
  REQUIRE_MESSAGE(lines.size() == 1, [&] {
    std::string all;
    for (const auto& l : lines) all += l + "\n";
    return all;
  }());
  return lines[0];
}

inline const std::string kData = "[data]\npath = \"corpus.txt\"\n";

}  // namespace meridian::testing
