#pragma once
// etcd's own auth (RBAC) for meridian's jobs. Every key of a job lies under /meridian/<job>/
// (RoundKeys); the job's role may read and write there and nowhere else, and each of its sites is
// a user with that role only: a site's identity cannot touch another job's keys. etcd's JSON
// gateway takes no identity from a TLS certificate (only its transport is checked), so a user
// proves itself with a password and then a token (EtcdOptions::credentials).
#include <map>
#include <string>

namespace meridian {

class EtcdClient;

std::string etcd_job_prefix(const std::string& job);  // "/meridian/<job>/"
std::string etcd_job_role(const std::string& job);    // "meridian/<job>"
std::string etcd_site_user(const std::string& job, const std::string& site);  // "meridian/<job>/<site>"

// As etcd's root (`admin`: a client with root's credentials, or any client while auth is off):
// the job's role with read-write on its prefix, and a user per site with its password and that
// role; a user there already takes the new password. Idempotent. Error(Peer) naming what etcd refused.
void grant_job(EtcdClient& admin, const std::string& job, const std::map<std::string, std::string>& site_passwords);

// Turns etcd's auth on, creating its root user with `root_password` (and the root role) first.
void enable_auth(EtcdClient& admin, const std::string& root_password);

}  // namespace meridian
