#include "sites/site/ops_token.hpp"

#include <cstdlib>

#include "core/io/secret_file.hpp"

namespace meridian {

std::string ops_token(const JobConfig& config) {
  if (const char* env = std::getenv("MERIDIAN_OPS_TOKEN"); env != nullptr && *env != '\0') return env;
  if (!config.ops.token_file) return "";
  return read_secret_file(*config.ops.token_file, "[ops] token_file: the ops token");
}

}  // namespace meridian
