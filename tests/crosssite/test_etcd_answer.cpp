// classify_etcd_answer: every way etcd's JSON gateway answers, told apart without an etcd.
#include <doctest/doctest.h>

#include "crosssite/control/etcd_answer.hpp"

using meridian::classify_etcd_answer;
using Kind = meridian::EtcdAnswer::Kind;

TEST_CASE("an answer is Ok with its body, a streaming call's result unwrapped") {
  const auto put = classify_etcd_answer(200, R"({"header":{"revision":"7"}})");
  REQUIRE(put.kind == Kind::Ok);
  CHECK(put.reply["header"]["revision"] == "7");
  const auto keepalive = classify_etcd_answer(200, R"({"result":{"ID":"42","TTL":"5"}})");
  REQUIRE(keepalive.kind == Kind::Ok);
  CHECK(keepalive.reply["ID"] == "42");
  CHECK(classify_etcd_answer(200, "{}").kind == Kind::Ok);  // the gateway leaves zero values out
}

TEST_CASE("no leader, and a cluster out of reach, are worth another member or another try") {
  const auto no_leader = classify_etcd_answer(503, R"({"error":"etcdserver: no leader","code":14})");
  CHECK(no_leader.kind == Kind::NoLeader);
  CHECK(no_leader.message == "etcdserver: no leader");
  CHECK(classify_etcd_answer(503, R"({"error":"etcdserver: request timed out","code":14})").kind == Kind::Unavailable);
  CHECK(classify_etcd_answer(504, R"({"error":"etcdserver: request timed out","code":4})").kind == Kind::Unavailable);
  // The gateway's own deadline comes as gRPC Unknown (2), named only in the message.
  CHECK(classify_etcd_answer(500, R"({"error":"context deadline exceeded","code":2})").kind == Kind::Unavailable);
  const auto stream = classify_etcd_answer(200, R"({"error":{"grpc_code":14,"message":"transport is closing"}})");
  CHECK(stream.kind == Kind::Unavailable);
  CHECK(stream.message == "transport is closing");
}

TEST_CASE("a lapsed lease and any other etcd error answer the request for good") {
  const auto gone = classify_etcd_answer(404, R"({"error":"etcdserver: requested lease not found","code":5})");
  CHECK(gone.kind == Kind::LeaseGone);
  const auto stream_gone =
      classify_etcd_answer(200, R"({"result":{"error":{"grpc_code":5,"message":"etcdserver: requested lease not found"}}})");
  CHECK(stream_gone.kind == Kind::LeaseGone);
  const auto refused = classify_etcd_answer(400, R"({"error":"etcdserver: key is not provided","code":3})");
  CHECK(refused.kind == Kind::Refused);
  CHECK(refused.message == "etcdserver: key is not provided");
  // An error object without a message is kept whole, so the operator sees what came.
  const auto bare = classify_etcd_answer(200, R"({"error":{"grpc_code":9}})");
  CHECK(bare.kind == Kind::Refused);
  CHECK(bare.message == R"({"grpc_code":9})");
}

TEST_CASE("whatever etcd does not write is Garbled, naming what came") {
  const auto html = classify_etcd_answer(502, "<html>Bad Gateway</html>");
  CHECK(html.kind == Kind::Garbled);
  CHECK(html.message == "HTTP 502 <html>Bad Gateway</html>");
  CHECK(classify_etcd_answer(200, "[1,2]").message == "answer is not a JSON object");
  CHECK(classify_etcd_answer(200, "").kind == Kind::Garbled);
  CHECK(classify_etcd_answer(200, "{\"header\":").kind == Kind::Garbled);  // cut short
  // A JSON object with a failure status but no error in it is no etcd answer either.
  CHECK(classify_etcd_answer(500, R"({"header":{}})").kind == Kind::Garbled);
  CHECK(classify_etcd_answer(503, std::string(1000, 'x')).message.size() < 220);
}

TEST_CASE("a token etcd no longer takes asks for a new one, a permission denied is final") {
  CHECK(classify_etcd_answer(401, R"({"error":"etcdserver: invalid auth token","code":16})").kind == Kind::AuthExpired);
  CHECK(classify_etcd_answer(400, R"({"error":"etcdserver: revision of auth store is old","code":3})").kind ==
        Kind::AuthExpired);
  CHECK(classify_etcd_answer(400, R"({"error":"etcdserver: user name is empty","code":3})").kind == Kind::AuthExpired);
  const auto denied = classify_etcd_answer(403, R"({"error":"etcdserver: permission denied","code":7})");
  CHECK(denied.kind == Kind::Refused);
  CHECK(denied.message == "etcdserver: permission denied");
  CHECK(classify_etcd_answer(400, R"({"error":"etcdserver: authentication failed, invalid user ID or password","code":3})")
            .kind == Kind::Refused);
}
