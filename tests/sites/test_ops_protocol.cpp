// The ops protocol: every request text parses to a typed request or to a sentence saying what
// is wrong (never an exception); which commands need the token; the token comparison.
#include <doctest/doctest.h>

#include <string>
#include <variant>

#include "sites/site/ops_protocol.hpp"

using namespace meridian;

namespace {

std::string problem(const std::string& text) {
  const auto r = parse_ops_request(text);
  REQUIRE_MESSAGE(std::holds_alternative<std::string>(r), text);
  return std::get<std::string>(r);
}

OpsRequest ok(const std::string& text) {
  const auto r = parse_ops_request(text);
  REQUIRE_MESSAGE(std::holds_alternative<OpsRequest>(r), text, ": ", std::get<std::string>(r));
  return std::get<OpsRequest>(r);
}

}  // namespace

TEST_CASE("every command parses with its arguments and goes back to the same JSON") {
  CHECK(ok(R"({"command":"status"})").command == OpsCommand::Status);
  CHECK(ok(R"({"command":"events","since":120})").since == 120);
  CHECK(ok(R"({"command":"checkpoints"})").command == OpsCommand::Checkpoints);
  const auto evict = ok(R"({"command":"evict","replica":2,"token":"t"})");
  CHECK(evict.replica == 2);
  CHECK(evict.token == "t");
  CHECK(ok(R"({"command":"set-lr","scale":0.25})").scale == 0.25);
  const auto rollback = ok(R"({"command":"rollback","to":"300","lr_scale":0.5})");
  CHECK(rollback.to == "300");
  CHECK(rollback.lr_scale == 0.5);
  CHECK_FALSE(ok(R"({"command":"rollback","to":"/a/ckpt.mrdn"})").lr_scale.has_value());
  CHECK(ok(R"({"command":"drain","token":"t"})").command == OpsCommand::Drain);
  CHECK(ok(R"({"command":"resume"})").command == OpsCommand::Resume);
  CHECK(ok(R"({"command":"pause-outer"})").command == OpsCommand::PauseOuter);
  CHECK(ok(R"({"command":"resume-outer"})").command == OpsCommand::ResumeOuter);
  for (const char* text : {R"({"command":"drain","token":"t"})", R"({"command":"resume-outer"})",
                           R"({"command":"evict","replica":2,"token":"t"})", R"({"command":"set-lr","scale":0.25})",
                           R"({"command":"rollback","lr_scale":0.5,"to":"300"})", R"({"command":"events","since":7})"}) {
    CAPTURE(text);
    CHECK(to_json(ok(text)) == nlohmann::json::parse(text));
  CHECK_FALSE(ok(text).pair);
  const char* pair = R"({"command":"wan-add-fault","kind":"latency","sites":["a","c"],"from":"1","to":"2","latency_ms":5,"pair":true})";
  CHECK(ok(pair).pair);
  CHECK(to_json(ok(pair)) == nlohmann::json::parse(pair));
  CHECK(problem(R"({"command":"wan-add-fault","kind":"latency","sites":["a","c"],"from":"1","to":"2","latency_ms":5,"pair":1})")
            .starts_with("wan-add-fault: \"pair\" must be true or false"));
  }
}

TEST_CASE("malformed requests get a sentence naming the problem") {
  CHECK(problem("") == "malformed request: not JSON");
  CHECK(problem("{\"command\": ") == "malformed request: not JSON");
  CHECK(problem("[1,2]") == "malformed request: expected a JSON object, found array");
  CHECK(problem("{}") == "malformed request: missing \"command\" (a string)");
  CHECK(problem(R"({"command":5})") == "malformed request: missing \"command\" (a string)");
  CHECK(problem(R"({"command":"reboot"})") ==
        "unknown command \"reboot\" (expected one of status, events, checkpoints, evict, checkpoint, set-lr, rollback, "
        "drain, resume, pause-outer, resume-outer, wan, wan-add-fault, wan-clear-faults)");
  CHECK(problem(R"({"command":"status","token":1})") == "malformed request: \"token\" must be a string");
  CHECK(problem(R"({"command":"evict"})").starts_with("evict: \"replica\" must be a replica id"));
  CHECK(problem(R"({"command":"evict","replica":-1})").starts_with("evict:"));
  CHECK(problem(R"({"command":"evict","replica":"1"})").starts_with("evict:"));
  CHECK(problem(R"({"command":"evict","replica":1.5})").starts_with("evict:"));
  CHECK(problem(R"({"command":"set-lr"})") == "set-lr: missing \"scale\" (a number > 0)");
  CHECK(problem(R"({"command":"set-lr","scale":0})") == "set-lr: \"scale\" must be a number > 0, found 0");
  CHECK(problem(R"({"command":"set-lr","scale":"big"})") == "set-lr: \"scale\" must be a number > 0, found \"big\"");
  CHECK(problem(R"({"command":"rollback"})").starts_with("rollback: \"to\" must name a checkpoint"));
  CHECK(problem(R"({"command":"rollback","to":"5","lr_scale":-2})").starts_with("rollback: \"lr_scale\" must be"));
  CHECK(problem(R"({"command":"events","since":-4})").starts_with("events: \"since\""));
  CHECK(problem(R"({"command":"rollback","to":"v1x"})").starts_with("rollback: \"v1x\" is no version: expected v<N>"));
}

TEST_CASE("rollback's forms: v<N> is a version, a step or a file a checkpoint, anything else like a version refused") {
  using Form = std::variant<std::optional<std::int64_t>, std::string>;
  CHECK(rollback_version("v12") == Form(std::optional<std::int64_t>(12)));
  CHECK(rollback_version("v0") == Form(std::optional<std::int64_t>(0)));
  for (const char* checkpoint : {"12", "ckpt-12.mrdn", "./v12", "/runs/a/checkpoints/v1", "v1.mrdn", "x", "V3"})
    CHECK(rollback_version(checkpoint) == Form(std::optional<std::int64_t>()));
  for (const char* bad : {"v", "v1x", "v-2", "v 3", "v1234567890123456789"}) {
    CAPTURE(bad);
    const auto form = rollback_version(bad);
    REQUIRE(std::holds_alternative<std::string>(form));
    CHECK(std::get<std::string>(form).find("expected v<N>") != std::string::npos);
  }
  const auto parsed = parse_ops_request(R"({"command":"rollback","to":"v7","lr_scale":0.5})");
  REQUIRE(std::holds_alternative<OpsRequest>(parsed));
  CHECK(std::get<OpsRequest>(parsed).version == 7);
  CHECK(to_json(std::get<OpsRequest>(parsed))["to"] == "v7");
  const auto file = parse_ops_request(R"({"command":"rollback","to":"ckpt-7.mrdn"})");
  CHECK_FALSE(std::get<OpsRequest>(file).version.has_value());
}

TEST_CASE("only commands that change something need the token, and the token must match exactly") {
  CHECK_FALSE(changes_state(OpsCommand::Status));
  CHECK_FALSE(changes_state(OpsCommand::Events));
  CHECK_FALSE(changes_state(OpsCommand::Checkpoints));
  CHECK(changes_state(OpsCommand::Evict));
  CHECK(changes_state(OpsCommand::Checkpoint));
  CHECK(changes_state(OpsCommand::SetLr));
  CHECK(changes_state(OpsCommand::Rollback));
  CHECK(changes_state(OpsCommand::Drain));
  CHECK(changes_state(OpsCommand::Resume));
  CHECK(changes_state(OpsCommand::PauseOuter));
  CHECK(changes_state(OpsCommand::ResumeOuter));
  CHECK_FALSE(changes_state(OpsCommand::Wan));
  CHECK(changes_state(OpsCommand::WanAddFault));
  CHECK(changes_state(OpsCommand::WanClearFaults));
  CHECK(token_matches("s3cret", "s3cret"));
  CHECK_FALSE(token_matches("s3cret", "s3cre"));
  CHECK_FALSE(token_matches("s3cret", "s3cret!"));
  CHECK_FALSE(token_matches("s3cret", "S3cret"));
  CHECK_FALSE(token_matches("s3cret", ""));
  CHECK_FALSE(token_matches("", ""));  // no token configured: nothing matches
}

TEST_CASE("wan commands: a fault as given (times as text or numbers), checked against the job by the agent") {
  CHECK(ok(R"({"command":"wan"})").command == OpsCommand::Wan);
  CHECK(ok(R"({"command":"wan-clear-faults","token":"t"})").command == OpsCommand::WanClearFaults);
  const auto f = ok(R"({"command":"wan-add-fault","kind":"bandwidth","sites":["a","b"],"from":"+5","to":30,"bandwidth_mbps":10})");
  CHECK(f.kind == "bandwidth");
  CHECK(f.sites == std::vector<std::string>{"a", "b"});
  CHECK(f.from_time == "+5");
  CHECK(f.to_time == "30");
  CHECK(f.bandwidth_mbps == 10);
  CHECK_FALSE(f.latency_ms.has_value());
  const char* text = R"({"command":"wan-add-fault","kind":"latency","sites":["c"],"from":"1","to":"2","latency_ms":5})";
  CHECK(to_json(ok(text)) == nlohmann::json::parse(text));
  CHECK(problem(R"({"command":"wan-add-fault"})") == "wan-add-fault: missing \"kind\" (a string)");
  CHECK(problem(R"({"command":"wan-add-fault","kind":"partition","sites":[],"from":"1","to":"2"})")
            .starts_with("wan-add-fault: \"sites\" must be a non-empty array"));
  CHECK(problem(R"({"command":"wan-add-fault","kind":"partition","sites":[3],"from":"1","to":"2"})")
            .starts_with("wan-add-fault: \"sites\" must hold strings"));
  CHECK(problem(R"({"command":"wan-add-fault","kind":"partition","sites":["a"],"to":"2"})")
            .starts_with("wan-add-fault: missing \"from\""));
  CHECK(problem(R"({"command":"wan-add-fault","kind":"partition","sites":["a"],"from":[1],"to":"2"})")
            .starts_with("wan-add-fault: \"from\" must be a number or a string"));
  CHECK(problem(R"({"command":"wan-add-fault","kind":"latency","sites":["a"],"from":"1","to":"2","latency_ms":"x"})")
            .starts_with("wan-add-fault: \"latency_ms\" must be a number"));
}
