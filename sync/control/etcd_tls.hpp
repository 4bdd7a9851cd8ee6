#pragma once
// A site's TLS files for etcd (endpoints given as https://): the job's CA, and the site's own
// certificate and private key, all PEM. `meridian keys` writes them; `meridian launch` makes
// throwaway ones for the etcd member it starts.
#include <filesystem>

namespace meridian {

struct EtcdTls {
  std::filesystem::path ca_file, cert_file, key_file;
  bool operator==(const EtcdTls&) const = default;
};

}  // namespace meridian
