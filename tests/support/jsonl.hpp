#pragma once
// Reading a run's .jsonl files in tests: every complete JSON line (a line being written right now
// is skipped), the events of one kind, and a bounded wait for a step to be logged.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace meridian::testing {

inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

// The training loss of every logged step of a run, in order (metrics.jsonl).
inline std::vector<double> logged_losses(const std::filesystem::path& run_dir) {
  std::vector<double> losses;
  for (const auto& j : read_jsonl(run_dir / "metrics.jsonl"))
    if (j.contains("loss")) losses.push_back(j["loss"].get<double>());
  return losses;
}

inline std::vector<nlohmann::json> events_of(const std::vector<nlohmann::json>& events, const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (const auto& e : events)
    if (e.value("event", "") == kind) out.push_back(e);
  return out;
}

// Polls `done` every 20 ms for up to a minute; whether it came true.
inline bool wait_until(const std::function<bool()>& done) {
  for (int i = 0; i < 3000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Until some metric line reports a loss at `step` or later.
inline bool wait_for_step(const std::filesystem::path& run, int step) {
  return wait_until([&] {
    for (const auto& m : read_jsonl(run / "metrics.jsonl"))
      if (m.contains("step") && m["step"].get<int>() >= step && m.contains("loss")) return true;
    return false;
  });
}

// Until `run`'s events.jsonl holds at least `count` events of kind `event`.
inline bool wait_for_event(const std::filesystem::path& run, const std::string& event, std::size_t count) {
  return wait_until([&] {
    std::size_t seen = 0;
    for (const auto& e : read_jsonl(run / "events.jsonl")) seen += e.value("event", "") == event;
    return seen >= count;
  });
}

}  // namespace meridian::testing
