// `meridian keys FILE --out DIR`: a job's secrets, one directory per site laid out to be copied to
// that site's host: the CURVE keypairs of its links (sites/keys/link_keys.hpp) and its etcd
// certificate under the job's own CA (sites/keys/etcd_keys.hpp); and what the job file then says.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"
#include "sites/keys/etcd_keys.hpp"
#include "sites/keys/link_keys.hpp"
#include "crosssite/control/etcd_auth.hpp"

namespace meridian::cli {

Action add_keys_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    std::string out;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("file", opts->config, "job file (TOML): its [[site]] entries get a keypair each")->required();
  app.add_option("--set", opts->overrides, "override a config key (repeatable)");
  app.add_option("--out", opts->out, "directory to write ca/ and <site>/{link.key,link.pub,etcd.crt,etcd.key,ca.crt} into")
      ->required();
  return [opts] {
    // The keys are what a job without them lacks: its links' plaintext is no reason to refuse it here.
    auto overrides = opts->overrides;
    overrides.push_back("job.insecure=true");
    const JobConfig config = load_job_config(opts->config, overrides);
    const std::filesystem::path out = std::filesystem::absolute(opts->out).lexically_normal();
    if (std::filesystem::exists(out / "ca" / "ca.key"))
      throw make_error(ErrorKind::Config, (out / "ca" / "ca.key").string(),
                       " exists: a job's keys are never overwritten; remove the directory first to replace them");
    const auto keys = write_link_keys(config, out);
    write_etcd_keys(config, out);
    std::printf("# CURVE keys of job %s, one directory per site under %s: copy each to its site's host\n"
                "# (link.key is its secret), and every link.pub to every host, or list the keys.\n"
                "# In the job file:\n[transport]\nlink_key_file = \"%s/{site}/link.key\"\n"
                "link_public_key_file = \"%s/{site}/link.pub\"  # or, in each [[site]] entry:\n",
                config.job.name.c_str(), out.c_str(), out.c_str(), out.c_str());
    for (const auto& [site, key] : keys)
      std::printf("#   name = \"%s\": link_public_key = \"%s\"\n", site.c_str(), key.c_str());
    std::printf("# etcd over mutual TLS: every member and site shows <site>/etcd.crt, signed by the job's CA in\n"
                "# %s/ca (ca.key signs: keep it off the sites). Run each site's etcd member with\n"
                "#   --cert-file, --peer-cert-file <site>/etcd.crt  --key-file, --peer-key-file <site>/etcd.key\n"
                "#   --trusted-ca-file, --peer-trusted-ca-file <site>/ca.crt  --client-cert-auth --peer-client-cert-auth\n"
                "# and https:// URLs. In the job file:\n[control]\nca_file = \"%s/{site}/ca.crt\"\n"
                "cert_file = \"%s/{site}/etcd.crt\"\nkey_file = \"%s/{site}/etcd.key\"\n"
                "password_file = \"%s/{site}/etcd.password\"\n",
                out.c_str(), out.c_str(), out.c_str(), out.c_str(), out.c_str());
    // etcd's auth: the grants an operator makes once, as etcd's root (crosssite/control/etcd_auth.hpp).
    std::printf(
        "# etcd's auth (each site its own user and role: its job's keys to read, its own records and\n"
        "# the shared ones to write), once, as etcd's root:\n");
    for (const auto& site : config.sites) {
      const std::string role = etcd_site_role(config.job.name, site.name);
      const std::string user = etcd_site_user(config.job.name, site.name);
      std::printf("#   etcdctl role add %s\n", role.c_str());
      for (const auto& p : etcd_site_permissions(config.job.name, site.name))
        std::printf("#   etcdctl role grant-permission %s%s %s %s\n", role.c_str(), p.prefix ? " --prefix=true" : "",
                    p.write ? "readwrite" : "read", p.key.c_str());
      std::printf("#   etcdctl user add %s --new-user-password=\"$(cat %s/%s/etcd.password)\"\n"
                  "#   etcdctl user grant-role %s %s\n",
                  user.c_str(), out.c_str(), site.name.c_str(), user.c_str(), role.c_str());
    }
    std::printf("#   (and, if it is not on yet: etcdctl user add root; etcdctl auth enable)\n");
    return 0;
  };
}

}  // namespace meridian::cli
