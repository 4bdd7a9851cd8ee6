#include "core/util/error.hpp"

namespace meridian {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Config: return "config";
    case ErrorKind::Data: return "data";
    case ErrorKind::Checkpoint: return "checkpoint";
    case ErrorKind::Io: return "io";
    case ErrorKind::Usage: return "usage";
    case ErrorKind::Peer: return "peer";
    case ErrorKind::Timeout: return "timeout";
  }
  return "unknown";
}

int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Usage: return 2;
    case ErrorKind::Config: return 78;
    case ErrorKind::Data: return 65;
    case ErrorKind::Checkpoint: return 66;
    case ErrorKind::Io:
    case ErrorKind::Peer:
    case ErrorKind::Timeout: return 1;
  }
  return 1;
}

std::optional<ErrorKind> permanent_failure(int exit_code) {
  for (const auto kind : {ErrorKind::Usage, ErrorKind::Config, ErrorKind::Data, ErrorKind::Checkpoint})
    if (meridian::exit_code(kind) == exit_code) return kind;
  return std::nullopt;
}

namespace detail {
void invariant_failed(const char* expr, const char* file, int line, const std::string& detail) {
  std::ostringstream out;
  out << "meridian invariant violated at " << file << ":" << line << ": " << expr;
  if (!detail.empty()) out << " (" << detail << ")";
  throw InvariantError(out.str());
}
}  // namespace detail

}  // namespace meridian
