#include "crosssite/control/etcd_auth.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/util/error.hpp"
#include "crosssite/control/base64.hpp"
#include "crosssite/control/etcd_client.hpp"

namespace meridian {

namespace {

using Json = nlohmann::json;

// An administrative call; false when etcd refused it because what it makes already exists.
bool created(EtcdClient& admin, const std::string& path, const Json& body) {
  try {
    admin.request(path, body);
    return true;
  } catch (const Error& e) {
    if (std::string(e.what()).find("already exists") == std::string::npos) throw;
    return false;
  }
}

void ensure(EtcdClient& admin, const std::string& path, const Json& body) { created(admin, path, body); }

void ensure_user(EtcdClient& admin, const std::string& user, const std::string& password) {
  const Json credentials = {{"name", user}, {"password", password}};
  if (!created(admin, "/v3/auth/user/add", credentials)) admin.request("/v3/auth/user/changepw", credentials);
}

}  // namespace

std::string etcd_job_prefix(const std::string& job) { return "/meridian/" + job + "/"; }
std::string etcd_site_user(const std::string& job, const std::string& site) { return "meridian/" + job + "/" + site; }
std::string etcd_site_role(const std::string& job, const std::string& site) { return etcd_site_user(job, site); }

std::vector<EtcdPermission> etcd_site_permissions(const std::string& job, const std::string& site) {
  const std::string root = etcd_job_prefix(job);
  return {{false, root, true},
          {true, root + "members/" + site, false},
          {true, root + "deltas/" + site + "/", true},
          {true, root + "commits/", true},
          {true, root + "wan/", true}};
}

bool etcd_permits(const std::vector<EtcdPermission>& granted, const std::string& key, bool write, bool range) {
  return std::any_of(granted.begin(), granted.end(), [&](const EtcdPermission& p) {
    if (write && !p.write) return false;
    return p.prefix ? key.starts_with(p.key) : !range && key == p.key;
  });
}

void grant_job(EtcdClient& admin, const std::string& job, const std::map<std::string, std::string>& site_passwords) {
  for (const auto& [site, password] : site_passwords) {
    const std::string role = etcd_site_role(job, site);
    ensure(admin, "/v3/auth/role/add", {{"name", role}});
    for (const auto& p : etcd_site_permissions(job, site)) {
      Json perm = {{"permType", p.write ? "READWRITE" : "READ"}, {"key", base64_encode(p.key)}};
      // A prefix is the range from it to the first key past it.
      if (p.prefix) perm["range_end"] = base64_encode(etcd_prefix_end(p.key));
      admin.request("/v3/auth/role/grant", {{"name", role}, {"perm", perm}});
    }
    const std::string user = etcd_site_user(job, site);
    ensure_user(admin, user, password);
    admin.request("/v3/auth/user/grant", {{"user", user}, {"role", role}});
  }
}

void enable_auth(EtcdClient& admin, const std::string& root_password) {
  ensure_user(admin, "root", root_password);
  ensure(admin, "/v3/auth/role/add", {{"name", "root"}});
  admin.request("/v3/auth/user/grant", {{"user", "root"}, {"role", "root"}});
  admin.request("/v3/auth/enable", Json::object());
}

}  // namespace meridian
