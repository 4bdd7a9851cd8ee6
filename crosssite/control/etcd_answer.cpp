#include "crosssite/control/etcd_answer.hpp"

namespace meridian {

namespace {

constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcUnavailable = 14;

EtcdAnswer with(EtcdAnswer::Kind kind, std::string message) { return {kind, {}, std::move(message)}; }

EtcdAnswer classify_error(const nlohmann::json& error, const nlohmann::json& reply) {
  std::string message = error.is_string() ? error.get<std::string>() : error.dump();
  int code = -1;
  if (const auto c = reply.find("code"); c != reply.end() && c->is_number_integer()) code = c->get<int>();
  if (error.is_object()) {
    if (const auto m = error.find("message"); m != error.end() && m->is_string()) message = m->get<std::string>();
    if (const auto c = error.find("grpc_code"); c != error.end() && c->is_number_integer()) code = c->get<int>();
  }
  if (message == "etcdserver: no leader") return with(EtcdAnswer::Kind::NoLeader, message);
  if (code == kGrpcUnavailable || code == kGrpcDeadlineExceeded ||
      message.find("context deadline exceeded") != std::string::npos)
    return with(EtcdAnswer::Kind::Unavailable, message);
  if (message.find("lease not found") != std::string::npos) return with(EtcdAnswer::Kind::LeaseGone, message);
  for (const char* stale : {"invalid auth token", "revision of auth store is old", "user name is empty"})
    if (message.find(stale) != std::string::npos) return with(EtcdAnswer::Kind::AuthExpired, message);
  return with(EtcdAnswer::Kind::Refused, message);
}

}  // namespace

EtcdAnswer classify_etcd_answer(int http_status, std::string_view body) {
  const auto status_line = [&] {
    return "HTTP " + std::to_string(http_status) + " " + std::string(body.substr(0, 200));
  };
  nlohmann::json reply = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!reply.is_object())
    return with(EtcdAnswer::Kind::Garbled, http_status != 200 ? status_line() : "answer is not a JSON object");
  if (const auto it = reply.find("result"); it != reply.end() && it->is_object()) reply = nlohmann::json(*it);
  if (const auto it = reply.find("error"); it != reply.end()) return classify_error(*it, reply);
  if (http_status != 200) return with(EtcdAnswer::Kind::Garbled, status_line());
  return {EtcdAnswer::Kind::Ok, std::move(reply), {}};
}

}  // namespace meridian
