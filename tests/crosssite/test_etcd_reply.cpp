// What EtcdClient's calls and EtcdWatch's stream read from etcd's JSON (etcd_reply), without an
// etcd: the answers etcd writes, and each way an answer can be wrong refused as Error(Peer) naming
// the field.
#include <doctest/doctest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/util/error.hpp"
#include "crosssite/control/base64.hpp"
#include "crosssite/control/etcd_reply.hpp"
#include "tests/support/error_of.hpp"

using namespace meridian;
using Json = nlohmann::json;

namespace {

Json kv(const std::string& key, const std::string& value) {
  return {{"key", base64_encode(key)}, {"value", base64_encode(value)}, {"mod_revision", "7"}};
}

Json range(std::vector<Json> kvs, const std::string& revision = "9") {
  return {{"header", {{"revision", revision}}}, {"kvs", std::move(kvs)}, {"count", "2"}};
}

// The message of the Error(Peer) that `read` throws.
template <class Read>
std::string refusal(Read read) {
  return testing::error_of(ErrorKind::Peer, read);
}

}  // namespace

TEST_CASE("a range of one key: its value, nothing when absent, and an answer naming another key is refused") {
  CHECK(etcd_reply::value_of(range({kv("/j/a", "one")}), "/j/a") == "one");
  CHECK_FALSE(etcd_reply::value_of(Json{{"header", {{"revision", "3"}}}}, "/j/a"));  // etcd leaves out no kvs
  CHECK(refusal([] { etcd_reply::value_of(range({kv("/j/b", "x")}), "/j/a"); }).find("another") != std::string::npos);
  CHECK(refusal([] {
          etcd_reply::value_of(range({kv("/j/a", "1"), kv("/j/a", "2")}), "/j/a");
        }).find("another") != std::string::npos);
}

TEST_CASE("a prefix range: the keys in order under the prefix and the revision read, anything else refused") {
  const auto read = etcd_reply::prefix_read(range({kv("/j/a", "1"), kv("/j/b", "2")}), "/j/");
  REQUIRE(read.kvs.size() == 2);
  CHECK(read.kvs[1] == std::pair<std::string, std::string>{"/j/b", "2"});
  CHECK(read.revision == 9);
  for (const auto& wrong :
       {range({kv("/j/b", "1"), kv("/j/a", "2")}), range({kv("/j/a", "1"), kv("/j/a", "2")}), range({kv("/k/a", "1")})})
    CHECK(refusal([&] { etcd_reply::prefix_read(wrong, "/j/"); }).find("out of range or order") != std::string::npos);
  CHECK(refusal([] {
          etcd_reply::prefix_read(Json{{"kvs", Json::array()}}, "/j/");
        }).find("'header'") != std::string::npos);
}

TEST_CASE("each field of the wrong type is refused, naming it") {
  Json bad_key = range({kv("/j/a", "1")});
  bad_key["kvs"][0]["key"] = "not base64!";
  CHECK(refusal([&] { etcd_reply::prefix_read(bad_key, "/j/"); }).find("'key' is not base64") != std::string::npos);
  Json number_value = range({kv("/j/a", "1")});
  number_value["kvs"][0]["value"] = 5;
  CHECK(refusal([&] { etcd_reply::prefix_read(number_value, "/j/"); }).find("'value' is not a string") !=
        std::string::npos);
  CHECK(refusal([] {
          etcd_reply::prefix_read(Json{{"header", {}}, {"kvs", "x"}}, "");
        }).find("'kvs'") != std::string::npos);
  CHECK(refusal([] {
          etcd_reply::succeeded(Json{{"succeeded", "true"}});
        }).find("'succeeded' is not a boolean") != std::string::npos);
  CHECK(refusal([] {
          etcd_reply::renewed_ttl(Json{{"TTL", 5.5}});
        }).find("'TTL' is not an integer") != std::string::npos);
  CHECK(refusal([] {
          etcd_reply::members(Json{{"members", Json::array({Json{{"clientURLs", "x"}}})}});
        }).find("'clientURLs'") != std::string::npos);
  CHECK(refusal([] { etcd_reply::member_status(Json{{"header", "x"}}); }).find("'header'") != std::string::npos);
}

TEST_CASE("integers come as strings or numbers, and out of their range, or not whole, they are refused") {
  CHECK(etcd_reply::renewed_ttl(Json{{"TTL", "5"}}) == 5);
  CHECK(etcd_reply::renewed_ttl(Json{{"TTL", 5}}) == 5);
  CHECK(etcd_reply::renewed_ttl(Json::object()) == 0);  // zero values are left out
  // A revision past int64 once read as a negative one.
  const std::uint64_t past = std::uint64_t{1} << 63;
  for (const Json& count : {Json(past), Json(std::to_string(past)), Json("12x"), Json(""), Json("+1"), Json("-3")})
    CHECK(refusal([&] { etcd_reply::prefix_state(Json{{"count", count}}); }).find("'count'") != std::string::npos);
  const std::uint64_t id = std::numeric_limits<std::uint64_t>::max();
  CHECK(etcd_reply::member_status(Json{{"header", {{"member_id", std::to_string(id)}}}, {"leader", id}}).leader == id);
  for (const Json& leader : {Json(-1), Json("-1"), Json("18446744073709551616")})
    CHECK(refusal([&] {
            etcd_reply::member_status(Json{{"header", Json::object()}, {"leader", leader}});
          }).find("'leader'") != std::string::npos);
}

TEST_CASE("leases: a grant's id, a renewal's seconds, a time to live, and a lease etcd no longer knows") {
  CHECK(etcd_reply::granted_lease(Json{{"ID", "7587873402138214660"}, {"TTL", "5"}}) == 7587873402138214660);
  CHECK(refusal([] { etcd_reply::granted_lease(Json{{"TTL", "5"}}); }).find("without a lease id") != std::string::npos);
  const auto ttl = etcd_reply::time_to_live(Json{{"ID", "1"}, {"TTL", "3"}, {"grantedTTL", "5"}});
  REQUIRE(ttl);
  CHECK(ttl->remaining_s == 3);
  CHECK(ttl->granted_s == 5);
  CHECK_FALSE(etcd_reply::time_to_live(Json{{"ID", "1"}, {"TTL", "-1"}}));
  CHECK(etcd_reply::auth_token(Json{{"token", "abc.1"}}) == "abc.1");
  CHECK(refusal([] { etcd_reply::auth_token(Json{{"token", ""}}); }).find("no token") != std::string::npos);
}

TEST_CASE("the cluster's members and one member's status, as etcd lists them") {
  const auto members = etcd_reply::members(Json{
      {"members", Json::array({Json{{"ID", "10276657743932975437"}, {"name", "e0"}, {"clientURLs", {"http://a:1"}}},
                               Json{{"ID", "5"}}})}});  // a member not started yet has no name or URLs
  REQUIRE(members.size() == 2);
  CHECK(members[0].id == 10276657743932975437ull);
  CHECK(members[0].client_urls == std::vector<std::string>{"http://a:1"});
  CHECK(members[1].name.empty());
  CHECK(refusal([] { etcd_reply::members(Json::object()); }).find("without 'members'") != std::string::npos);
  const auto status = etcd_reply::member_status(Json{
      {"header", {{"member_id", "9"}}}, {"leader", "9"}, {"version", "3.5.9"}, {"dbSize", "20480"}, {"raftTerm", "2"}});
  CHECK(status.id == 9);
  CHECK(status.version == "3.5.9");
  CHECK(status.db_size == 20480);
}

TEST_CASE("an answer that is not a JSON object is refused by every reader") {
  for (const Json& junk : {Json(), Json(5), Json("x"), Json::array({1, 2})}) {
    CAPTURE(junk.dump());
    CHECK(!refusal([&] { etcd_reply::value_of(junk, "k"); }).empty());
    CHECK(!refusal([&] { etcd_reply::prefix_read(junk, ""); }).empty());
    CHECK(!refusal([&] { etcd_reply::prefix_state(junk); }).empty());
    CHECK(!refusal([&] { etcd_reply::succeeded(junk); }).empty());
    CHECK(!refusal([&] { etcd_reply::renewed_ttl(junk); }).empty());
    CHECK(!refusal([&] { etcd_reply::time_to_live(junk); }).empty());
    CHECK(!refusal([&] { etcd_reply::members(junk); }).empty());
    CHECK(!refusal([&] { etcd_reply::member_status(junk); }).empty());
    CHECK(!refusal([&] { etcd_reply::auth_token(junk); }).empty());
  }
}

TEST_CASE("a watch line: the watch begun, its events by area, an unreadable key in every area, and the rest not ok") {
  const std::vector<std::string> areas = {"/j/members/", "/j/commits/"};
  const auto created = etcd_reply::watch_line(R"({"result":{"header":{"revision":"9"},"created":true}})", areas);
  CHECK(created.ok);
  CHECK(created.created);
  CHECK(created.events == 0);
  const Json events = {{"result",
                        {{"events", Json::array({Json{{"kv", kv("/j/commits/1", "x")}},
                                                 Json{{"kv", kv("/j/commits/2", "x")}, {"type", "DELETE"}},
                                                 Json{{"kv", {{"key", 5}}}}})}}}};
  const auto read = etcd_reply::watch_line(events.dump(), areas);
  CHECK(read.ok);
  CHECK_FALSE(read.created);
  CHECK(read.events == 3);
  CHECK(read.area_events == std::vector<std::uint64_t>{1, 3});
  for (const char* line : {R"({"error":{"grpc_code":14,"message":"closing"}})", R"({"result":{"canceled":true}})",
                           "[1,2]", "not json", ""})
    CHECK_FALSE(etcd_reply::watch_line(line, areas).ok);
}
