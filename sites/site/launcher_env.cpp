#include "sites/site/launcher_env.hpp"

#include <cstdlib>
#include <limits>
#include <string>

#include "core/util/error.hpp"

namespace meridian {
namespace {

std::optional<long> number(const char* name, long lo, long hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < lo || n > hi)
    throw make_error(ErrorKind::Config, "environment variable ", name, "=\"", v, "\": expected an integer in [", lo,
                     ", ", hi, "]");
  return n;
}

template <class T>
std::optional<T> first_of(std::optional<long> a, std::optional<long> b) {
  if (a) return static_cast<T>(*a);
  if (b) return static_cast<T>(*b);
  return std::nullopt;
}

}  // namespace

LauncherEnvironment launcher_environment() {
  constexpr long kMaxInt = std::numeric_limits<int>::max();
  LauncherEnvironment env;
  env.rank = first_of<int>(number("RANK", 0, kMaxInt), number("SLURM_PROCID", 0, kMaxInt));
  env.world_size = first_of<int>(number("WORLD_SIZE", 1, kMaxInt), number("SLURM_NTASKS", 1, kMaxInt));
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') env.master_addr = addr;
  env.master_port = first_of<std::uint16_t>(number("MASTER_PORT", 1, 65535), std::nullopt);
  return env;
}

}  // namespace meridian
