#pragma once
// How a site reaches its job's etcd, from the job's [control] table: the endpoints, the TLS files
// (ca_file, cert_file, key_file) and the user and password (password_file; "{site}" in a path
// stands for the site's name); and the writing of those secrets for a whole job (`meridian keys`).
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "core/config/job_config.hpp"
#include "crosssite/control/etcd_client.hpp"

namespace meridian {

// This site's files when the job speaks TLS to etcd, nullopt otherwise. Error(Config) naming the
// file when one is missing, or when the private key is open to other users.
std::optional<EtcdTls> etcd_tls(const JobConfig& config, const std::string& site);
// The site's user and password when the job names a password file, nullopt otherwise.
// Error(Config) when the file is missing, empty or open to other users.
std::optional<EtcdCredentials> etcd_credentials(const JobConfig& config, const std::string& site);
// The endpoints, TLS files and credentials together; the caller sets the timeouts.
EtcdOptions etcd_options(const JobConfig& config, const std::string& site);

// The job's certificate authority in dir/ca (ca.key stays there: it signs, and no site needs it)
// and, per site, dir/<site>/ca.crt, etcd.crt and etcd.key: one certificate for the site's etcd
// client and for an etcd member on its host, naming the site's host, 127.0.0.1 and localhost;
// and dir/<site>/etcd.password, its etcd user's password (mode 0600). Returns the passwords by
// site, for etcd's grants (crosssite/control/etcd_auth). Error(Config) when the CA is there already
// (never overwritten).
std::map<std::string, std::string> write_etcd_keys(const JobConfig& config, const std::filesystem::path& dir);

}  // namespace meridian
