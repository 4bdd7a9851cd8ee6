// What a site's /metrics shows: the leader's figures and the agent's, every sample labelled with
// the site, WAN traffic per peer; figures not published are left out; figures a replica wrote
// badly are skipped, never fatal; the port rule of [ops] metrics_port.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>

#include "core/config/job_config.hpp"
#include "core/util/error.hpp"
#include "sites/site/site_metrics.hpp"
#include "intrasite/group/protocol.hpp"
#include "tests/support/prom_parser.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using namespace meridian::testing;
using nlohmann::json;

namespace {

const json kLeader = {{"step", 120},        {"loss", 2.5},        {"lr", 1e-3},          {"lr_scale", 0.5},
                      {"rollbacks", 1},     {"tokens", 30720},    {"tok_s", 5000.5},     {"step_s", 0.05},
                      {"utilization", 0.9}, {"goodput", 0.96},    {"heals", 2},          {"heal_s", 0.3},
                      {"sdc_findings", 1},  {"version", 4},       {"staleness", 1},      {"live_sites", 3},
                      {"quorum", 3},        {"codec_ratio", 0.25}, {"deltas_screened_out", 1},
                      {"refused", {{"deltas_damaged", 2}, {"requests_malformed", 0}, {"transfers_unknown_tag", 3}}},
                      {"wan", {{"eu-west", {{"sent", 1000}, {"received", 900}}}, {"ap \"south\"", {{"sent", 5}, {"received", 6}}}}},
                      // As SiteExchange::measured_links writes them; ap-south has no transfer measured yet.
                      {"links", {{"eu-west", {{"rtt_ms", 24.5}, {"rtt_ms_min", 20.0}, {"in_mbps", 80.0}, {"out_mbps", 96.0}}},
                                 {"ap-south", {{"rtt_ms", 150.0}}}}}};

void store_text(Store& store, const std::string& text) {
  store.set(site_keys::figures(), std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace

TEST_CASE("every figure the issue names is there, labelled, and reads back as valid exposition") {
  const AgentFigures agent{7, 2, 3, 1, 1};
  const auto e = parse_prometheus(render_site_metrics("us-east", kLeader, agent));
  const std::map<std::string, std::string> at = {{"site", "us-east"}};
  CHECK(e.value("meridian_up", at) == 1);
  CHECK(e.value("meridian_generation", at) == 7);
  CHECK(e.value("meridian_replicas_live", at) == 2);
  CHECK(e.value("meridian_replicas_configured", at) == 3);
  CHECK(e.value("meridian_replica_restarts_total", at) == 1);
  CHECK(e.value("meridian_replica_evictions_total", at) == 1);
  CHECK(e.value("meridian_loss", at) == 2.5);
  CHECK(e.value("meridian_tokens_per_second", at) == 5000.5);
  CHECK(e.value("meridian_step_seconds", at) == 0.05);
  CHECK(e.value("meridian_compute_utilization", at) == 0.9);
  CHECK(e.value("meridian_version", at) == 4);
  CHECK(e.value("meridian_staleness_versions", at) == 1);
  CHECK(e.value("meridian_quorum_size", at) == 3);
  CHECK(e.value("meridian_heals_total", at) == 2);
  CHECK(e.value("meridian_heal_seconds", at) == 0.3);
  CHECK(e.value("meridian_codec_ratio", at) == 0.25);
  CHECK(e.value("meridian_refused_total", {{"site", "us-east"}, {"what", "deltas_damaged"}}) == 2);
  CHECK(e.value("meridian_refused_total", {{"what", "requests_malformed"}}) == 0);
  CHECK(e.value("meridian_refused_total", {{"what", "transfers_unknown_tag"}}) == 3);
  CHECK_THROWS(e.value("meridian_refused_total", {{"what", "gradients_refused"}}));  // not in the figures
  CHECK(e.value("meridian_sdc_findings_total", at) == 1);
  CHECK(e.value("meridian_goodput", at) == 0.96);
  CHECK(e.value("meridian_rollbacks_total", at) == 1);
  CHECK(e.value("meridian_wan_bytes_sent_total", {{"site", "us-east"}, {"peer", "eu-west"}}) == 1000);
  CHECK(e.value("meridian_wan_bytes_received_total", {{"peer", "eu-west"}}) == 900);
  CHECK(e.value("meridian_wan_bytes_sent_total", {{"peer", "ap \"south\""}}) == 5);
  CHECK(e.value("meridian_wan_rtt_seconds", {{"site", "us-east"}, {"peer", "eu-west"}}) == doctest::Approx(0.0245));
  CHECK(e.value("meridian_wan_rtt_seconds", {{"peer", "ap-south"}}) == doctest::Approx(0.150));
  CHECK(e.value("meridian_wan_receive_bytes_per_second", {{"peer", "eu-west"}}) == doctest::Approx(10e6));
  CHECK(e.value("meridian_wan_send_bytes_per_second", {{"peer", "eu-west"}}) == doctest::Approx(12e6));
  CHECK_THROWS(e.value("meridian_wan_send_bytes_per_second", {{"peer", "ap-south"}}));  // none measured
  CHECK(e.types.at("meridian_wan_rtt_seconds") == "gauge");
  CHECK(e.types.at("meridian_tokens_total") == "counter");
  CHECK(e.types.at("meridian_loss") == "gauge");
  for (const auto& s : e.samples) CHECK_MESSAGE(s.labels.at("site") == "us-east", s.name);
}

TEST_CASE("before the leader's first figures, and in a one-site job, only what is known is shown") {
  const auto none = parse_prometheus(render_site_metrics("local", json::object(), {0, 1, 1, 0, 0}));
  CHECK(none.has("meridian_up"));
  CHECK_FALSE(none.has("meridian_loss"));
  json local = kLeader;
  for (const char* k : {"version", "staleness", "live_sites", "quorum", "codec_ratio", "wan", "links"}) local.erase(k);
  const auto e = parse_prometheus(render_site_metrics("local", local, {0, 1, 1, 0, 0}));
  CHECK(e.has("meridian_loss"));
  CHECK_FALSE(e.has("meridian_version"));
  CHECK_FALSE(e.has("meridian_wan_bytes_sent_total"));
  CHECK_FALSE(e.has("meridian_wan_rtt_seconds"));
}

TEST_CASE("figures of the wrong type are skipped, and garbage in the store is no figures at all") {
  json bad = {{"loss", "high"},
              {"step", nullptr},
              {"tok_s", 10},
              {"wan", {{"x", 5}, {"y", {{"sent", "a"}}}}},
              {"links", {{"x", {{"rtt_ms", "fast"}}}, {"y", 3}}}};
  const auto e = parse_prometheus(render_site_metrics("s", bad, {}));
  CHECK_FALSE(e.has("meridian_loss"));
  CHECK_FALSE(e.has("meridian_step"));
  CHECK(e.value("meridian_tokens_per_second") == 10);
  CHECK_FALSE(e.has("meridian_wan_bytes_sent_total"));
  CHECK_FALSE(e.has("meridian_wan_rtt_seconds"));

  MemoryStore store;
  SiteFiguresBoard board("s");
  board.update(store, {});
  CHECK_FALSE(parse_prometheus(board.render()).has("meridian_loss"));
  store_text(store, kLeader.dump());
  board.update(store, {3, 1, 1, 0, 0});
  CHECK(parse_prometheus(board.render()).value("meridian_loss") == 2.5);
  for (const std::string garbage : {"{not json", "[1, 2]", "\"a string\"", ""}) {
    store_text(store, garbage);
    board.update(store, {});
    CHECK_FALSE(parse_prometheus(board.render()).has("meridian_loss"));
  }
}

TEST_CASE("[ops] metrics_port: 0 is any port for every site, otherwise the base plus the site's index") {
  TempDir dir("metrics-port");
  std::ofstream(dir / "d.txt") << "data";
  std::ofstream(dir / "job.toml") << "[data]\npath = \"d.txt\"\n[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n";
  const auto any = load_job_config(dir / "job.toml");
  CHECK(metrics_port(any, "a") == 0);
  CHECK(metrics_port(any, "b") == 0);
  const auto fixed = load_job_config(dir / "job.toml", {"ops.metrics_port=9400"});
  CHECK(metrics_port(fixed, "a") == 9400);
  CHECK(metrics_port(fixed, "b") == 9401);
  CHECK_THROWS_AS(metrics_port(load_job_config(dir / "job.toml", {"ops.metrics_port=65535"}), "b"), Error);
}
