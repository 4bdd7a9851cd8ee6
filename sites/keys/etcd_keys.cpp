#include "sites/keys/etcd_keys.hpp"

#include <vector>

#include "core/io/secret_file.hpp"
#include "core/util/error.hpp"
#include "sites/keys/certificates.hpp"
#include "sites/keys/link_keys.hpp"
#include "crosssite/control/etcd_auth.hpp"

namespace meridian {

std::optional<EtcdTls> etcd_tls(const JobConfig& config, const std::string& site) {
  const auto& c = config.control;
  if (!c.ca_file || !c.cert_file || !c.key_file) return std::nullopt;
  EtcdTls tls{site_path(*c.ca_file, site), site_path(*c.cert_file, site), site_path(*c.key_file, site)};
  for (const auto& [key, file] : {std::pair{"ca_file", &tls.ca_file}, std::pair{"cert_file", &tls.cert_file}})
    if (!std::filesystem::is_regular_file(*file))
      throw make_error(ErrorKind::Config, "[control] ", key, " ", file->string(), ": no such file (site ", site, ")");
  read_secret_file(tls.key_file, "[control] key_file: site " + site + "'s etcd private key");
  return tls;
}

std::optional<EtcdCredentials> etcd_credentials(const JobConfig& config, const std::string& site) {
  if (!config.control.password_file) return std::nullopt;
  const auto file = site_path(*config.control.password_file, site);
  return EtcdCredentials{etcd_site_user(config.job.name, site),
                         read_secret_file(file, "[control] password_file: site " + site + "'s etcd password")};
}

EtcdOptions etcd_options(const JobConfig& config, const std::string& site) {
  EtcdOptions options;
  options.endpoints = config.control.endpoints;
  options.tls = etcd_tls(config, site);
  options.credentials = etcd_credentials(config, site);
  return options;
}

std::map<std::string, std::string> write_etcd_keys(const JobConfig& config, const std::filesystem::path& dir) {
  std::map<std::string, std::string> passwords;
  make_private_directory(dir / "ca");
  write_certificate_authority(dir / "ca", "meridian job " + config.job.name);
  for (const auto& site : config.sites) {
    const auto out = dir / site.name;
    make_private_directory(out);
    std::vector<std::string> names{"127.0.0.1", "localhost"};
    if (site.host != "127.0.0.1" && site.host != "localhost") names.insert(names.begin(), site.host);
    write_certificate(dir / "ca", out / "etcd.crt", out / "etcd.key", names);
    std::filesystem::copy_file(dir / "ca" / "ca.crt", out / "ca.crt", std::filesystem::copy_options::overwrite_existing);
    passwords[site.name] = random_secret();
    write_secret_file(out / "etcd.password", passwords[site.name] + "\n");
  }
  return passwords;
}

}  // namespace meridian
