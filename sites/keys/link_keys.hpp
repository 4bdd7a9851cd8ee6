#pragma once
// The CURVE keys of a job's links (transport/link/curve.hpp), from its configuration: each site's
// public key, as its [[site]] entry lists it or else from [transport] link_public_key_file, and
// this site's secret key from [transport] link_key_file, held to its public one. "{site}" in
// either path stands for the site's name. And the writing of fresh keys (`meridian keys`, and
// `meridian launch` for a job that lists none).
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "core/config/job_config.hpp"
#include "transport/link/zmq_link.hpp"

namespace meridian {

// `path` with "{site}" in it replaced by `site`.
std::filesystem::path site_path(const std::filesystem::path& path, const std::string& site);
// The secret key file of `site`. The job's links must speak CURVE.
std::filesystem::path link_key_file(const JobConfig& config, const std::string& site);
// Each site's public key, by site (empty when the links speak no CURVE). Error(Config) naming a
// public key file that is missing or holds no key.
std::map<std::string, std::string> listed_link_keys(const JobConfig& config);
// This site's keypair and the job's keys when the links speak CURVE, nullopt otherwise.
// Error(Config) when its key file is missing, open to other users or holds no key, or when the
// key is not the one listed for `site`.
std::optional<LinkCurve> link_curve(const JobConfig& config, const std::string& site);
// A fresh keypair for every site of the job: dir/<site>/link.key (the secret, mode 0600, in a 0700
// directory) and dir/<site>/link.pub. Returns the public keys by site. Error(Config) when a
// site's key is there already (never overwritten: its peers know the old one); Error(Io) when a
// file cannot be written.
std::map<std::string, std::string> write_link_keys(const JobConfig& config, const std::filesystem::path& dir);

}  // namespace meridian
