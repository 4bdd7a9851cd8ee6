// core/runlog: the run directory's JSON-lines logs and summary, and the progress line.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/runlog/progress.hpp"
#include "core/runlog/run_log.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every line must be one JSON object; the file must end with a newline.
std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  const std::string text = read_file(p);
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    REQUIRE(nlohmann::json::accept(line));
    out.push_back(nlohmann::json::parse(line));
    REQUIRE(out.back().is_object());
  }
  return out;
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename());
  return names;
}

// Everything written to a tmpfile(), read back.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  for (int c; (c = std::fgetc(f)) != EOF;) out.push_back(static_cast<char>(c));
  return out;
}

}  // namespace

TEST_CASE("RunLog: metrics and events are JSON lines, appended across instances") {
  TempDir dir("runlog");
  const fs::path run = dir / "a/b/run";  // created, parents included
  const double t0 = unix_time_now();
  {
    RunLog log(run);
    CHECK(log.dir() == run);
    log.metric({{"step", 1}, {"loss", 2.5}, {"site", "local"}});
    log.event("start", {{"step", 0}, {"model", "tiny \"quoted\"\nnewline"}});
    // Lines are flushed as they are written: readable while the log is open.
    CHECK(read_jsonl(run / "metrics.jsonl").size() == 1);
    CHECK(read_jsonl(run / "events.jsonl").size() == 1);
  }
  {
    RunLog log(run);
    log.metric({{"step", 2}, {"loss", 2.25}});
    log.event("resume", {{"step", 1}});
    log.event("end");
  }
  const auto metrics = read_jsonl(run / "metrics.jsonl");
  REQUIRE(metrics.size() == 2);
  CHECK(metrics[0] == nlohmann::json{{"step", 1}, {"loss", 2.5}, {"site", "local"}});
  CHECK(metrics[1] == nlohmann::json{{"step", 2}, {"loss", 2.25}});

  const auto events = read_jsonl(run / "events.jsonl");
  REQUIRE(events.size() == 3);
  std::vector<std::string> kinds;
  for (const auto& e : events) {
    kinds.push_back(e.at("event").get<std::string>());
    REQUIRE(e.at("time").is_number());
    CHECK(e["time"].get<double>() >= t0 - 1);
    CHECK(e["time"].get<double>() <= unix_time_now() + 1);
  }
  CHECK(kinds == std::vector<std::string>{"start", "resume", "end"});
  CHECK(events[0]["model"] == "tiny \"quoted\"\nnewline");  // escaped: still one line
  CHECK(events[0]["step"] == 0);
  CHECK(events[1]["step"] == 1);
  CHECK(events[2].size() == 2);  // time and event only
  CHECK(events[0]["time"].get<double>() <= events[2]["time"].get<double>());
}

TEST_CASE("RunLog: summary.json is replaced whole, with no temp file left") {
  TempDir dir("runlog-summary");
  RunLog log(dir.path());
  log.summary({{"final_val_loss", 2.0}, {"tokens", 100}});
  log.summary({{"final_val_loss", 1.5}, {"tokens", 200}, {"model", "tiny"}});
  const std::string text = read_file(dir / "summary.json");
  REQUIRE(nlohmann::json::accept(text));
  CHECK(nlohmann::json::parse(text) == nlohmann::json{{"final_val_loss", 1.5}, {"tokens", 200}, {"model", "tiny"}});
  CHECK(names_in(dir.path()) == std::set<std::string>{"metrics.jsonl", "events.jsonl", "summary.json"});
}

TEST_CASE("RunLog: a run directory that cannot be created is an Io error naming it") {
  TempDir dir("runlog-bad");
  std::ofstream(dir / "file") << "x";
  try {
    RunLog log(dir / "file" / "run");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Io);
    CHECK(std::string(e.what()).find((dir / "file" / "run").string()) != std::string::npos);
  }
}

TEST_CASE("format_progress") {
  CHECK(format_progress({120, 1000, 2.34564, 15200.4, 65}) == "step 120/1000 | loss 2.3456 | 15200 tok/s | ETA 1m05s");
  CHECK(format_progress({1, 3, 5.0, 0.0, 0.0}) == "step 1/3 | loss 5.0000 | 0 tok/s | ETA 0m00s");
  CHECK(format_progress({3, 3, 0.5, 99.6, -4.0}) == "step 3/3 | loss 0.5000 | 100 tok/s | ETA 0m00s");
  CHECK(format_progress({10, 20, 1.0, 1.0, 3599.6}) == "step 10/20 | loss 1.0000 | 1 tok/s | ETA 60m00s");
  CHECK(format_progress({10, 20, 1.0, 1.0, 609.0}) == "step 10/20 | loss 1.0000 | 1 tok/s | ETA 10m09s");
}

TEST_CASE("ProgressPrinter: plain lines when not a terminal") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  const ProgressState a{1, 4, 3.0, 10, 3}, b{2, 4, 2.0, 10, 2};
  {
    ProgressPrinter p(f, false);
    p.update(a);
    p.line("val loss 2.9");
    p.update(b);
    p.finish();
  }
  CHECK(contents(f) == format_progress(a) + "\nval loss 2.9\n" + format_progress(b) + "\n");
  std::fclose(f);

  // The detecting constructor sees a regular file as no terminal.
  f = std::tmpfile();
  REQUIRE(f);
  {
    ProgressPrinter p(f);
    p.update(a);
    p.finish();
  }
  CHECK(contents(f) == format_progress(a) + "\n");
  std::fclose(f);
}

TEST_CASE("ProgressPrinter: a terminal gets one line rewritten in place with carriage returns") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  const ProgressState a{1, 4, 3.0, 10, 3}, b{2, 4, 2.0, 10, 2};
  const std::string clear = "\r\033[K";
  {
    ProgressPrinter p(f, true);
    p.update(a);
    p.update(b);
    p.line("checkpoint saved");  // clears the progress line, prints a permanent one
    p.line("another");
    p.update(a);
    p.finish();  // ends the pending progress line
    p.finish();  // nothing pending: nothing written
  }
  CHECK(contents(f) == clear + format_progress(a) + clear + format_progress(b) + clear + "checkpoint saved\n" +
                          "another\n" + clear + format_progress(a) + "\n");
  std::fclose(f);
}
