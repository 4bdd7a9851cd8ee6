#pragma once
// etcd's own auth (RBAC) for meridian's jobs. Every key of a job lies under /meridian/<job>/
// (RoundKeys). Each site is a user with a role of its own: it reads its job's keys, and writes only
// its own records and the keys every site shares, so a site's identity can touch no other job's
// keys, nor overwrite another site's announcement or file a dispute in another's name. etcd's JSON
// gateway takes no identity from a TLS certificate (only its transport is checked), so a user
// proves itself with a password and then a token (EtcdOptions::credentials).
#include <map>
#include <string>
#include <vector>

namespace meridian {

class EtcdClient;

std::string etcd_job_prefix(const std::string& job);                          // "/meridian/<job>/"
std::string etcd_site_user(const std::string& job, const std::string& site);  // "meridian/<job>/<site>"
std::string etcd_site_role(const std::string& job, const std::string& site);  // the same name: its own role

// One permission of a role: a key, or every key starting with it.
struct EtcdPermission {
  bool write = false;  // read and write; else read only
  std::string key;
  bool prefix = false;
  bool operator==(const EtcdPermission&) const = default;
};

// A site's role: read every key of its job; write its member record (members/<site>), its
// announcements and the disputes it files (deltas/<site>/), and the keys all sites write: the
// commit log (commits/, each version created once) and the emulated WAN's start and operator
// faults (wan/). The layout is RoundKeys' (crosssite/round/records.hpp) and sim/emulator's.
std::vector<EtcdPermission> etcd_site_permissions(const std::string& job, const std::string& site);

// Whether `granted` lets a user read (or, `write`, write) `key`, or with `range` every key that
// starts with it, as etcd judges a request: one permission must cover the whole of it.
bool etcd_permits(const std::vector<EtcdPermission>& granted, const std::string& key, bool write, bool range);

// As etcd's root (`admin`: a client with root's credentials, or any client while auth is off):
// per site, its role with etcd_site_permissions and a user with its password and that role only;
// a user there already takes the new password. Idempotent. Error(Peer) naming what etcd refused.
void grant_job(EtcdClient& admin, const std::string& job, const std::map<std::string, std::string>& site_passwords);

// Turns etcd's auth on, creating its root user with `root_password` (and the root role) first.
void enable_auth(EtcdClient& admin, const std::string& root_password);

}  // namespace meridian
