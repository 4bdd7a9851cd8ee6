// meridian report on a run directory: the plots and index.html are written, every site (and the
// baseline, dashed) is drawn, notable events are marked on the time axis, the summary is shown,
// partial lines are skipped, the samples of text listed, and a directory without metrics is a
// clear error.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/report/run_report.hpp"
#include "core/util/error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;
using nlohmann::json;

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Two sites, 10 logged steps each, a rollback event and a commit (not notable) in between.
void write_run(const std::filesystem::path& dir, double loss_offset) {
  std::filesystem::create_directories(dir);
  std::ofstream metrics(dir / "metrics.jsonl");
  for (int i = 0; i < 10; ++i)
    for (const char* site : {"us-east", "eu-west"})
      metrics << json{{"time", 1000.0 + i}, {"site", site}, {"step", i * 10}, {"loss", 5.0 - 0.3 * i + loss_offset},
                      {"tokens", i * 1000}, {"utilization", 0.5 + 0.04 * i}}
                     .dump()
              << "\n";
  metrics << json{{"time", 1010.0}, {"site", "us-east"}, {"step", 100}, {"val_loss", 2.2}, {"tokens", 10000}}.dump() << "\n";
  metrics << "{\"time\": 1011, \"site\": \"us-ea";  // a line being written
  std::ofstream(dir / "events.jsonl")
      << json{{"time", 1000.5}, {"event", "site_start"}, {"site", "us-east"}}.dump() << "\n"
      << json{{"time", 1004.0}, {"event", "rollback"}, {"site", "us-east"}, {"step", 40}}.dump() << "\n"
      << json{{"time", 1004.2}, {"event", "recovered"}, {"site", "us-east"}}.dump() << "\n"
      << json{{"time", 1005.0}, {"event", "commit_applied"}}.dump() << "\n"
      << json{{"time", 1006.0}, {"event", "sample"}, {"site", "eu-west"}, {"step", 50}, {"text", "ROMEO:\n<thou> & I"}}
             .dump()
      << "\n"
      << json{{"time", 1007.0}, {"event", "sample"}, {"site", "us-east"}, {"step", 60}, {"error", "not finite"}}.dump()
      << "\n"
      // Lines damaged by hand or by a disk: fields of another type are read as absent, never thrown on.
      << R"({"time": 1008, "event": 5})"
      << "\n"
      << R"({"time": 1008, "event": "sample", "step": 1e30, "text": "lost"})"
      << "\n"
      << R"({"time": 1008, "event": "rollback", "step": "x"})"
      << "\n";
  std::ofstream(dir / "summary.json") << json{{"final_val_loss", 2.2}, {"model", "tiny"}, {"sites", json::array()}}.dump();
}

}  // namespace

TEST_CASE("a run and its baseline: five plots and an index that shows them with the summary") {
  TempDir dir("report");
  write_run(dir / "run", 0);
  write_run(dir / "base", 0.1);
  const auto files = write_report(dir / "run", dir / "base", dir / "out");
  REQUIRE(files.plots.size() == 5);
  for (const auto& p : files.plots) CHECK_MESSAGE(read(p).starts_with("<svg"), p);
  const auto loss_tokens = read(dir / "out" / "loss_tokens.svg");
  for (const char* name : {">us-east<", ">eu-west<", ">baseline us-east<", ">baseline eu-west<"})
    CHECK_MESSAGE(loss_tokens.find(name) != std::string::npos, name);
  const auto loss_time = read(dir / "out" / "loss_time.svg");
  CHECK(loss_time.find("rollback (us-east) step 40, recovered (us-east)") != std::string::npos);  // one line
  CHECK(loss_time.find("commit_applied") == std::string::npos);
  CHECK(read(dir / "out" / "utilization.svg").find(">us-east<") != std::string::npos);
  CHECK(read(dir / "out" / "val_loss_tokens.svg").find(">us-east<") != std::string::npos);
  const auto html = read(files.index);
  CHECK(read(dir / "out" / "val_loss_time.svg").find(">baseline us-east<") != std::string::npos);
  for (const char* img : {"loss_tokens.svg", "loss_time.svg", "val_loss_tokens.svg", "val_loss_time.svg", "utilization.svg"})
    CHECK(html.find(std::string("<img src=\"") + img + "\"") != std::string::npos);
  CHECK(html.find("<td>final_val_loss</td><td>2.2</td>") != std::string::npos);
  CHECK(html.find("<td>model</td><td>tiny</td>") != std::string::npos);
  CHECK(html.find("<td>4 s</td><td>rollback (us-east) step 40, recovered (us-east)</td>") != std::string::npos);
  CHECK(html.find("<td>commit_applied</td><td>1</td>") != std::string::npos);
  // The samples of text, escaped, in the order written.
  const auto samples = html.find("<h2>Samples of the model's text</h2>");
  REQUIRE(samples != std::string::npos);
  const auto first = html.find("<td>50</td><td>eu-west</td><td><pre>ROMEO:\n&lt;thou&gt; &amp; I</pre></td>");
  const auto second = html.find("<td>60</td><td>us-east</td><td><pre>(not finite)</pre></td>");
  REQUIRE(first != std::string::npos);
  REQUIRE(second != std::string::npos);
  CHECK(samples < first);
  CHECK(first < second);
  CHECK(html.find("<td>sample</td><td>3</td>") != std::string::npos);  // one of them damaged, not listed
  CHECK(html.find("<td>?</td><td>1</td>") != std::string::npos);
  CHECK(html.find("lost") == std::string::npos);
}

TEST_CASE("a directory without metrics.jsonl is Error(Io) naming it") {
  TempDir dir("report-empty");
  try {
    write_report(dir.path(), std::nullopt, dir / "out");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Io);
    CHECK(std::string(e.what()).find("no metrics.jsonl in " + dir.path().string()) != std::string::npos);
  }
}

TEST_CASE("time to the baseline's final loss: interpolated between evaluations, on the last site to get there") {
  CHECK(first_reach({{0, 3.0}, {10, 2.0}, {20, 1.0}}, 1.5) == doctest::Approx(15.0));
  CHECK(first_reach({{0, 3.0}, {10, 2.0}}, 3.5) == doctest::Approx(0.0));
  CHECK(!first_reach({{0, 3.0}, {10, 2.0}}, 1.9).has_value());
  TempDir dir("reach");
  // The baseline (offset 0) ends at 2.2 at 10 s; a run 0.3 lower on each evaluation gets there sooner.
  const auto evals = [](const std::filesystem::path& run, double offset) {
    std::filesystem::create_directories(run);
    std::ofstream metrics(run / "metrics.jsonl");
    for (int i = 0; i <= 10; i += 5)
      for (const char* site : {"a", "b"})
        metrics << json{{"time", 100.0 + i}, {"site", site}, {"val_loss", 3.2 - 0.1 * i - offset}}.dump() << "\n";
  };
  evals(dir / "base", 0);
  evals(dir / "run", 0.25);
  const auto files = write_report(dir / "run", dir / "base", dir / "out");
  REQUIRE(files.time_to_baseline_loss.has_value());
  const auto& t = *files.time_to_baseline_loss;
  CHECK(t.target == doctest::Approx(2.2));
  CHECK(t.baseline_s == doctest::Approx(10.0));
  REQUIRE(t.run_s.has_value());
  CHECK(*t.run_s == doctest::Approx(7.5));  // 3.2 - 0.25 - 0.1 t = 2.2
  CHECK(read(files.index).find("this run reached it after 8 s (0.75x the baseline") != std::string::npos);
  const auto never = write_report(dir / "base", dir / "run", dir / "out2");
  CHECK(!never.time_to_baseline_loss->run_s.has_value());
}
