#include "core/runlog/run_log.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "core/util/error.hpp"

namespace meridian {
namespace {

std::FILE* open_append(const std::filesystem::path& p) {
  std::FILE* f = std::fopen(p.c_str(), "a");
  if (!f) throw make_error(ErrorKind::Io, "cannot open ", p.string(), " for appending: ", std::strerror(errno));
  return f;
}

}  // namespace

double unix_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

RunLog::RunLog(const std::filesystem::path& run_dir) : dir_(run_dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot create run directory ", dir_.string(), ": ", ec.message());
  metrics_ = open_append(dir_ / "metrics.jsonl");
  events_ = open_append(dir_ / "events.jsonl");
}

RunLog::~RunLog() {
  if (metrics_) std::fclose(metrics_);
  if (events_) std::fclose(events_);
}

void RunLog::append(std::FILE* f, const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f) != line.size() || std::fflush(f) != 0)
    throw make_error(ErrorKind::Io, "cannot write to ", dir_.string(), ": ", std::strerror(errno));
}

void RunLog::metric(const nlohmann::json& record) { append(metrics_, record); }

void RunLog::event(const std::string& kind, nlohmann::json fields) {
  nlohmann::json record = {{"time", unix_time_now()}, {"event", kind}};
  record.update(fields);
  append(events_, record);
}

void RunLog::summary(const nlohmann::json& figures) {
  const auto tmp = dir_ / "summary.json.tmp";
  {
    std::ofstream out(tmp);
    out << figures.dump(2) << "\n";
    if (!out) throw make_error(ErrorKind::Io, "cannot write ", tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dir_ / "summary.json", ec);
  if (ec) throw make_error(ErrorKind::Io, "cannot rename ", tmp.string(), ": ", ec.message());
}

}  // namespace meridian
