#pragma once
// The site's store secret. The agent makes a fresh one at each start and writes it into the site's
// run dir, readable by its owner only (core/io/secret_file); its replicas, its own or a cluster
// launcher's that share the run dir, read it there. The store refuses any request without it, so
// a process of another user cannot file an operator's command, or anything else, for the replicas.
#include <chrono>
#include <filesystem>
#include <string>

namespace meridian {

inline std::filesystem::path store_secret_file(const std::filesystem::path& site_run_dir) {
  return site_run_dir / "store.secret";
}

// The agent's: a fresh secret in the file for as long as the agent runs, removed when it ends.
class StoreSecret {
 public:
  explicit StoreSecret(const std::filesystem::path& site_run_dir);
  ~StoreSecret();
  StoreSecret(const StoreSecret&) = delete;
  StoreSecret& operator=(const StoreSecret&) = delete;
  const std::string& value() const { return value_; }

 private:
  std::filesystem::path path_;
  std::string value_;
};

// A replica's: the secret its agent wrote, waited for up to `wait` (a cluster launcher may start
// replicas before the agent has written it). Error(Config) when it does not come or is open to others.
std::string read_store_secret(const std::filesystem::path& site_run_dir, std::chrono::milliseconds wait);

// A replica's, before it talks to its agent's store at `store_endpoint`: the secret that store
// takes. A file left by an agent that died without removing it (a cluster launcher restarting the
// whole job starts the replicas beside the new agent) is read again until the new agent's
// replaces it. Error(Config) as read_store_secret; Error(Peer) when the store still refuses the
// file's secret, or Error(Timeout) when no store answers, after `wait`.
std::string accepted_store_secret(const std::filesystem::path& site_run_dir, const std::string& store_endpoint,
                                  std::chrono::milliseconds wait);

}  // namespace meridian
