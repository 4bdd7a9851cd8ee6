#pragma once
// A site's TLS files for etcd, from its job's [control] ca_file, cert_file and key_file ("{site}"
// in a path stands for the site's name), and their writing for a whole job (`meridian keys`).
#include <filesystem>
#include <optional>
#include <string>

#include "core/config/job_config.hpp"
#include "sync/control/etcd_tls.hpp"

namespace meridian {

// This site's files when the job speaks TLS to etcd, nullopt otherwise. Error(Config) naming the
// file when one is missing, or when the private key is open to other users.
std::optional<EtcdTls> etcd_tls(const JobConfig& config, const std::string& site);

// The job's certificate authority in dir/ca (ca.key stays there: it signs, and no site needs it)
// and, per site, dir/<site>/ca.crt, etcd.crt and etcd.key: one certificate for the site's etcd
// client and for an etcd member on its host, naming the site's host, 127.0.0.1 and localhost.
// Error(Config) when the CA is there already (never overwritten).
void write_etcd_keys(const JobConfig& config, const std::filesystem::path& dir);

}  // namespace meridian
