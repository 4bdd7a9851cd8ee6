#include "sites/ctl/ops_client.hpp"

#include <cstdio>
#include <sstream>

#include <zmq.hpp>

#include "core/util/error.hpp"

namespace meridian {

nlohmann::json ops_call(const std::string& endpoint, const nlohmann::json& request, std::chrono::milliseconds timeout) {
  zmq::context_t context{1};
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.connect(endpoint);
  const std::string text = request.dump();
  socket.send(zmq::buffer(text), zmq::send_flags::none);
  zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0}};
  if (zmq::poll(items, 1, timeout) <= 0)
    throw make_error(ErrorKind::Timeout, "the site agent at ", endpoint, " did not answer within ", timeout.count(),
                     " ms (is the site running?)");
  zmq::message_t reply;
  (void)socket.recv(reply, zmq::recv_flags::none);
  auto j = nlohmann::json::parse(reply.to_string_view(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw make_error(ErrorKind::Peer, "the agent at ", endpoint, " sent no JSON object");
  return j;
}

namespace {

std::string fixed(const nlohmann::json& j, const char* key, int digits) {
  if (!j.contains(key) || !j[key].is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, j[key].get<double>());
  return buf;
}

// The control plane's part of the status: etcd members, the leader, the site's lease.
std::string control_lines(const nlohmann::json& c) {
  std::ostringstream out;
  if (!c.value("etcd", false)) {
    out << "control plane: none (" << c.value("note", std::string("-")) << ")\n";
    return out.str();
  }
  const auto leader = c.contains("leader") && c["leader"].is_string() ? c["leader"].get<std::string>() : "none";
  out << "control plane: etcd, leader " << leader << "\n";
  if (c.contains("error")) out << "  member list: " << c["error"].get<std::string>() << "\n";
  for (const auto& m : c.value("members", nlohmann::json::array())) {
    std::string urls;
    for (const auto& u : m.value("client_urls", nlohmann::json::array())) urls += (urls.empty() ? "" : ",") + u.get<std::string>();
    out << "  member " << m.value("name", std::string("?")) << " " << m.value("id", std::string()) << " " << urls << "  "
        << (m.value("reachable", false) ? "reachable" : "UNREACHABLE") << (m.value("leader", false) ? "  leader" : "");
    if (m.contains("error")) out << "  (" << m["error"].get<std::string>() << ")";
    out << "\n";
  }
  const auto& l = c.contains("lease") ? c["lease"] : nlohmann::json();
  if (!l.is_object()) out << "  lease: none (the site is not registered)\n";
  else if (l.value("alive", false))
    out << "  lease " << l.value("id", std::string()) << ": " << l.value("ttl_s", 0) << " s left of " << l.value("granted_ttl_s", 0) << " s\n";
  else
    out << "  lease " << l.value("id", std::string()) << ": " << l.value("error", std::string("expired or revoked")) << "\n";
  return out.str();
}

}  // namespace

std::string status_table(const nlohmann::json& s) {
  std::ostringstream out;
  const auto& f = s.value("figures", nlohmann::json::object());
  out << "site " << s.value("site", "?") << "  generation " << s.value("generation", -1) << "  members "
      << s.value("members", nlohmann::json::array()).dump() << "\n";
  out << "step " << fixed(f, "step", 0) << "  loss " << fixed(f, "loss", 4) << "  lr " << fixed(f, "lr", 6)
      << " (x" << fixed(f, "lr_scale", 3) << ")  tokens/s " << fixed(f, "tok_s", 0) << "  utilization "
      << fixed(f, "utilization", 2) << "  goodput " << fixed(f, "goodput", 3) << "\n";
  if (f.contains("version"))
    out << "version " << fixed(f, "version", 0) << "  staleness " << fixed(f, "staleness", 0) << "  live sites "
        << fixed(f, "live_sites", 0) << "  quorum " << fixed(f, "quorum", 0) << "\n";
  if (f.contains("waiting") && f["waiting"].is_object())
    out << "waiting " << fixed(f["waiting"], "s", 0) << " s for " << f["waiting"].value("for", std::string("?")) << "\n";
  if (f.contains("wan") && f["wan"].is_object())
    for (const auto& [peer, b] : f["wan"].items())
      out << "wan " << peer << ": sent " << b.value("sent", 0) << " B, received " << b.value("received", 0) << " B\n";
  if (s.contains("mode") && s["mode"].is_object()) {
    const auto& m = s["mode"];
    out << "mode " << m.value("state", "?") << (m.value("outer_paused", false) ? "  (outer exchange paused)" : "") << "\n";
  }
  out << control_lines(s.value("control", nlohmann::json::object()));
  if (f.contains("wan_faults") && f["wan_faults"].is_object())
    for (const auto& fault : f["wan_faults"].value("operator", nlohmann::json::array()))
      out << "wan fault (operator): " << fault.dump() << "\n";
  out << "\nreplica  alive  member  heartbeat_age_s  restarts\n";
  for (const auto& r : s.value("replicas", nlohmann::json::array())) {
    char line[128];
    std::snprintf(line, sizeof line, "%7d  %5s  %6s  %15s  %8d\n", r.value("id", -1), r.value("alive", false) ? "yes" : "no",
                  r.value("member", false) ? "yes" : "no", fixed(r, "heartbeat_age_s", 2).c_str(), r.value("restarts", 0));
    out << line;
  }
  out << "\nlast events:\n";
  for (const auto& e : s.value("events", nlohmann::json::array())) {
    auto rest = e;
    rest.erase("time");
    rest.erase("event");
    out << "  " << e.value("event", "?") << " " << rest.dump() << "\n";
  }
  return out.str();
}

std::string wan_table(const nlohmann::json& w) {
  std::ostringstream out;
  out << "site " << w.value("site", "?") << (w.value("emulated", false) ? "  emulated WAN" : "  WAN not emulated");
  if (w.contains("job_s")) out << "  job at " << fixed(w, "job_s", 1) << " s";
  out << "\n\npeer          rtt_ms (min)      n  age_s   out_mbps   n  age_s    in_mbps   n  age_s  configured                    fault\n";
  for (const auto& p : w.value("peers", nlohmann::json::array())) {
    const auto& m = p.value("measured", nlohmann::json::object());
    const auto& c = p.value("configured", nlohmann::json::object());
    const auto n = [&](const char* key) { return m.contains(key) ? std::to_string(m[key].get<long long>()) : std::string("-"); };
    std::string configured = "unshaped";
    if (!c.empty())
      configured = fixed(c, "latency_ms", 1) + " ms +-" + fixed(c, "jitter_ms", 1) + ", " +
                   (c.value("bandwidth_mbps", 0.0) > 0 ? fixed(c, "bandwidth_mbps", 0) + " Mbit/s" : "unlimited");
    char line[512];
    std::snprintf(line, sizeof line, "%-12s %7s (%7s) %4s %6s  %9s %3s %6s  %9s %3s %6s  %-28s  %s\n",
                  p.value("site", "?").c_str(), fixed(m, "rtt_ms", 1).c_str(), fixed(m, "rtt_ms_min", 1).c_str(),
                  n("rtt_ms_samples").c_str(), fixed(m, "rtt_ms_age_s", 1).c_str(), fixed(m, "out_mbps", 1).c_str(),
                  n("out_mbps_samples").c_str(), fixed(m, "out_mbps_age_s", 1).c_str(), fixed(m, "in_mbps", 1).c_str(),
                  n("in_mbps_samples").c_str(), fixed(m, "in_mbps_age_s", 1).c_str(), configured.c_str(),
                  p.value("partitioned", false) ? "PARTITIONED" : p.value("fault_now", false) ? "yes" : "no");
    out << line;
  }
  out << "\nfaults (job seconds; wall clock)\n";
  for (const auto& f : w.value("faults", nlohmann::json::array())) {
    std::string figure;
    if (f.contains("bandwidth_mbps")) figure = fixed(f, "bandwidth_mbps", 1) + " Mbit/s";
    if (f.contains("latency_ms")) (figure = "+").append(fixed(f, "latency_ms", 1)).append(" ms");
    out << "  " << f.value("source", "?") << " " << f.value("kind", "?") << " " << f.value("sites", nlohmann::json::array()).dump()
        << " " << figure << " from " << fixed(f, "from_s", 1) << " to " << fixed(f, "to_s", 1) << " s";
    if (f.contains("from_wall")) out << " (" << fixed(f, "from_wall", 3) << " to " << fixed(f, "to_wall", 3) << ")";
    out << (f.value("holds", false) ? "  HOLDS NOW" : "") << "\n";
  }
  return out.str();
}

}  // namespace meridian
