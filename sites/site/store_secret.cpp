#include "sites/site/store_secret.hpp"

#include <thread>

#include "core/io/secret_file.hpp"

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

}  // namespace meridian
