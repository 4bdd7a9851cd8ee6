#pragma once
// What one answer of etcd's JSON gateway says, as a pure function of its HTTP status and body:
// every way etcd reports an error is told apart here and unit-tested without an etcd
// (tests/crosssite/test_etcd_answer.cpp); EtcdClient decides from it whether to try another member.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace meridian {

struct EtcdAnswer {
  enum class Kind {
    Ok,           // `reply` is the answer (a streaming call's "result" unwrapped)
    NoLeader,     // the member has no leader now: another member, or this one after an election
    Unavailable,  // the member could not get an answer from the cluster in time
    LeaseGone,    // the lease the request names is no more (expired or revoked)
    AuthExpired,  // auth is on and the request's token is missing, unknown or older than the auth
                  // store's last change: authenticate again, then ask again
    Refused,      // etcd answered this request for good with an error
    Garbled,      // not an answer etcd writes
  };
  Kind kind = Kind::Garbled;
  nlohmann::json reply;  // Ok only
  std::string message;   // the error etcd gave, or what is wrong with the answer
};

// Unary calls answer {"error": "...", "code": N}, streaming ones {"result": {...}} or
// {"error": {"grpc_code": N, "message": "..."}}. gRPC Unavailable (14), DeadlineExceeded (4) and
// the gateway's own "context deadline exceeded" are Unavailable; "etcdserver: no leader" is
// NoLeader; "lease not found" is LeaseGone; "invalid auth token", "revision of auth store is old"
// and "user name is empty" are AuthExpired; any other error (a permission denied among them) Refused. A body that is not a JSON
// object, or a status other than 200 without an error in the body, is Garbled.
EtcdAnswer classify_etcd_answer(int http_status, std::string_view body);

}  // namespace meridian
