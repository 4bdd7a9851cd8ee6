#include "sites/site/store_secret.hpp"

#include <algorithm>
#include <thread>

#include "core/io/secret_file.hpp"
#include "core/util/error.hpp"
#include "intrasite/comm/tcp_store.hpp"

namespace meridian {

StoreSecret::StoreSecret(const std::filesystem::path& site_run_dir)
    : path_(store_secret_file(site_run_dir)), value_(random_secret()) {
  write_secret_file(path_, value_);
}

StoreSecret::~StoreSecret() {
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

std::string read_store_secret(const std::filesystem::path& site_run_dir, std::chrono::milliseconds wait) {
  const auto path = store_secret_file(site_run_dir);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!std::filesystem::exists(path) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return read_secret_file(path, "the site's store secret (written by its agent)");
}

std::string accepted_store_secret(const std::filesystem::path& site_run_dir, const std::string& store_endpoint,
                                  std::chrono::milliseconds wait) {
  using namespace std::chrono;
  const auto deadline = steady_clock::now() + wait;
  const auto left = [&] { return std::max(milliseconds(1), ceil<milliseconds>(deadline - steady_clock::now())); };
  bool refused = false;  // a probe had the store's answer: not this secret
  const auto refusal = [&] {
    return make_error(ErrorKind::Peer, "the store at ", store_endpoint, " still refuses the secret in ",
                      store_secret_file(site_run_dir).string(), " after ", wait.count(),
                      " ms: is that run dir another agent's?");
  };
  for (;;) {
    std::string secret = read_store_secret(site_run_dir, left());
    // A short probe: while an old file names a store that is not up yet, the file may change.
    TcpStoreClient probe(store_endpoint, secret, std::min(left(), milliseconds(1000)));
    try {
      if (probe.secret_accepted()) return secret;
      refused = true;
      if (steady_clock::now() >= deadline) throw refusal();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Timeout) throw;
      // The last probe may be cut short by the deadline: what the store said before still holds.
      if (steady_clock::now() >= deadline) throw refused ? refusal() : e;
    }
    std::this_thread::sleep_for(std::min(left(), milliseconds(100)));
  }
}

}  // namespace meridian
