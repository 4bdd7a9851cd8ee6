#pragma once
// A site's TLS files for etcd (endpoints given as https://): the job's CA, and the site's own
// certificate and private key, all PEM. `meridian keys` writes them; `meridian launch` makes
// throwaway ones for the etcd member it starts. And, where etcd's auth is on, the user a client
// authenticates as (etcd's JSON gateway takes no identity from a certificate).
#include <filesystem>
#include <string>

namespace meridian {

struct EtcdTls {
  std::filesystem::path ca_file, cert_file, key_file;
  bool operator==(const EtcdTls&) const = default;
};

struct EtcdCredentials {
  std::string user, password;
};

}  // namespace meridian
