#include "crosssite/control/control_health.hpp"

#include <cstdio>
#include <future>

#include "crosssite/control/etcd_client.hpp"

namespace meridian {
namespace {

std::string hex(std::uint64_t id) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(id));
  return buf;
}

// One attempt on one member, no retries beyond its own short budget.
EtcdClient one_member(const std::string& endpoint, const ControlHealthOptions& options) {
  EtcdOptions o = options.etcd;
  o.endpoints = {endpoint};
  o.timeout = options.member_timeout;
  o.request_timeout = options.member_timeout;
  return EtcdClient(o);
}

}  // namespace

ControlHealth read_control_health(const ControlHealthOptions& options, std::int64_t lease) {
  ControlHealth out;
  // One member at a time, each with its own budget: a stopped member first in line must not use
  // up the time of the ones behind it.
  std::vector<EtcdClient::Member> listed;
  std::string answering;
  for (const auto& endpoint : options.etcd.endpoints) {
    try {
      listed = one_member(endpoint, options).member_list();
      answering = endpoint;
      break;
    } catch (const Error& e) {
      out.error += (out.error.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  if (answering.empty()) {
    for (const auto& endpoint : options.etcd.endpoints) listed.push_back({0, "", {endpoint}});
  } else {
    out.error.clear();
  }
  // Every member at once: a reading costs one member_timeout however many are down.
  std::vector<std::future<ControlHealth::Member>> probes;
  for (const auto& m : listed)
    probes.push_back(std::async(std::launch::async, [&options, m] {
      ControlHealth::Member member;
      member.id = m.id == 0 ? "" : hex(m.id);
      member.name = m.name;
      member.client_urls = m.client_urls;
      if (m.client_urls.empty()) {
        member.error = "no client URL (a member not started yet)";
        return member;
      }
      try {
        const auto status = one_member(m.client_urls.front(), options).status();
        member.reachable = true;
        member.version = status.version;
        member.leader = status.leader != 0 && status.leader == status.id;
        member.leader_id = status.leader;
      } catch (const EtcdNoQuorum& e) {
        member.reachable = true;  // it answered, but knows no leader
        member.error = e.what();
      } catch (const Error& e) {
        member.error = e.what();
      }
      return member;
    }));
  std::uint64_t leader = 0;
  for (auto& p : probes) {
    out.members.push_back(p.get());
    if (out.members.back().leader_id != 0) leader = out.members.back().leader_id;
  }
  for (const auto& m : listed)
    if (leader != 0 && m.id == leader) out.leader = m.name;
  if (lease != 0) {
    ControlHealth::Lease l;
    l.id = lease;
    try {
      if (answering.empty()) throw make_error(ErrorKind::Io, "no etcd member answered");
      if (const auto ttl = one_member(answering, options).lease_time_to_live(lease)) {
        l.alive = true;
        l.remaining_s = ttl->remaining_s;
        l.granted_s = ttl->granted_s;
      }
    } catch (const Error& e) {
      l.error = e.what();
    }
    out.lease = l;
  }
  return out;
}

nlohmann::json to_json(const ControlHealth& h) {
  nlohmann::json members = nlohmann::json::array();
  for (const auto& m : h.members) {
    nlohmann::json j = {{"id", m.id},
                        {"name", m.name},
                        {"client_urls", m.client_urls},
                        {"reachable", m.reachable},
                        {"leader", m.leader}};
    if (!m.version.empty()) j["version"] = m.version;
    if (!m.error.empty()) j["error"] = m.error;
    members.push_back(std::move(j));
  }
  nlohmann::json out = {{"etcd", true}, {"members", members}, {"leader", h.leader ? nlohmann::json(*h.leader) : nlohmann::json()}};
  if (!h.error.empty()) out["error"] = h.error;
  if (h.lease) {
    nlohmann::json l = {{"id", hex(static_cast<std::uint64_t>(h.lease->id))}, {"alive", h.lease->alive}};
    if (h.lease->alive) l.update({{"ttl_s", h.lease->remaining_s}, {"granted_ttl_s", h.lease->granted_s}});
    if (!h.lease->error.empty()) l["error"] = h.lease->error;
    out["lease"] = l;
  }
  return out;
}

}  // namespace meridian
