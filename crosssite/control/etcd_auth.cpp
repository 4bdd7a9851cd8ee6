#include "crosssite/control/etcd_auth.hpp"

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
std::string etcd_job_role(const std::string& job) { return "meridian/" + job; }
std::string etcd_site_user(const std::string& job, const std::string& site) { return "meridian/" + job + "/" + site; }

void grant_job(EtcdClient& admin, const std::string& job, const std::map<std::string, std::string>& site_passwords) {
  const std::string role = etcd_job_role(job), prefix = etcd_job_prefix(job);
  ensure(admin, "/v3/auth/role/add", {{"name", role}});
  // permType READWRITE (2): the whole prefix, from the prefix to the first key past it.
  admin.request("/v3/auth/role/grant", {{"name", role},
                                        {"perm",
                                         {{"permType", "READWRITE"},
                                          {"key", base64_encode(prefix)},
                                          {"range_end", base64_encode(etcd_prefix_end(prefix))}}}});
  for (const auto& [site, password] : site_passwords) {
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
