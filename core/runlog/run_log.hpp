#pragma once
// What every run leaves behind in its run directory (DESIGN.md, "Run directory"):
//   metrics.jsonl  one JSON object per logged step
//   events.jsonl   one JSON object per event (start, resume, checkpoint, rejection, end, ...)
//   summary.json   final figures, rewritten atomically at the end
// Both .jsonl files are appended to, so a resumed run continues the same files.
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace meridian {

class RunLog {
 public:
  explicit RunLog(const std::filesystem::path& run_dir);  // creates the directory; Error(Io) on failure
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  // Each call writes one line and flushes it, so a crash loses at most the line being written.
  void metric(const nlohmann::json& record);
  void event(const std::string& kind, nlohmann::json fields = nlohmann::json::object());
  void summary(const nlohmann::json& figures);  // temp file + rename

  const std::filesystem::path& dir() const { return dir_; }

 private:
  void append(std::FILE* f, const nlohmann::json& record);
  std::filesystem::path dir_;
  std::FILE* metrics_ = nullptr;
  std::FILE* events_ = nullptr;
};

// Seconds since the Unix epoch, as a double: the "time" field of every record.
double unix_time_now();

}  // namespace meridian
