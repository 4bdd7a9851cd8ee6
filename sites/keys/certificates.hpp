#pragma once
// The X.509 side of a job's secrets (OpenSSL): a certificate authority of its own and the
// certificates it signs, for etcd's mutual TLS. Keys are P-256; private keys are written mode 0600
// (core/io/secret_file.hpp), certificates 0644. `meridian keys` writes them for a deployment,
// `meridian launch` throwaway ones for the etcd member it starts.
#include <filesystem>
#include <string>
#include <vector>

namespace meridian {

// dir/ca.crt and dir/ca.key: a fresh key and a self-signed CA certificate naming `name`, valid for
// `days`. Error(Config) when dir/ca.key is there already (never overwritten: every certificate
// of the job hangs on it); Error(Io) when a file cannot be written.
void write_certificate_authority(const std::filesystem::path& dir, const std::string& name, int days = 825);

// `cert` and `key`: a fresh key and a certificate for `names` (IP addresses or DNS names, its
// subjectAltName), signed by the CA in ca_dir, good for either end of TLS. Its subject has no
// common name: etcd's JSON gateway refuses a client certificate that has one under
// --client-cert-auth. Error(Config) when the CA's files cannot be read or `names` is empty.
void write_certificate(const std::filesystem::path& ca_dir, const std::filesystem::path& cert,
                       const std::filesystem::path& key, const std::vector<std::string>& names, int days = 825);

}  // namespace meridian
