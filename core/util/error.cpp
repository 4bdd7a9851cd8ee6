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

namespace detail {
void invariant_failed(const char* expr, const char* file, int line, const std::string& detail) {
  std::ostringstream out;
  out << "meridian invariant violated at " << file << ":" << line << ": " << expr;
  if (!detail.empty()) out << " (" << detail << ")";
  throw InvariantError(out.str());
}
}  // namespace detail

}  // namespace meridian
