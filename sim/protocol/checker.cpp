#include "sim/protocol/checker.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "crosssite/outer/delta_mean.hpp"
#include "crosssite/outer/outer_state.hpp"

namespace meridian {
namespace {

template <class... Args>
std::string say(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace

Checker::Checker(std::vector<float> initial, OuterOptions outer, CodecOptions codec, CommitRuleOptions rule,
                 FragmentPlan plan, DeltaScreenOptions screen)
    : initial_(std::move(initial)), outer_(outer), codec_(codec), rule_(rule), plan_(std::move(plan)), screen_(screen) {}

void Checker::submitted(const std::string& site, std::int64_t round, std::span<const std::byte> bytes,
                        std::span<const float> progress) {
  sent_.emplace(std::make_pair(site, round), std::vector<std::byte>(bytes.begin(), bytes.end()));
  std::vector<float> decoded(progress.size());
  decode(bytes, decoded);
  // Lossless deltas (fp32) of weights near 1: float rounding is a few 1e-8; lost or doubled progress is ~1e-2.
  for (std::size_t i = 0; i < decoded.size(); ++i)
    if (std::abs(decoded[i] - progress[i]) > 1e-4f) {
      fail(say(site, "'s delta of round ", round, " is not its progress: entry ", i, " is ", decoded[i],
               ", trained ", progress[i]));
      return;
    }
}

void Checker::applied(const std::string& site, const CommitRecord& record, std::uint64_t hash, bool adopted) {
  const std::int64_t v = record.number;
  const std::int64_t held = holds_.contains(site) ? holds_[site] : 0;
  // A state adopted may be the version held: a copy found damaged replaced (its hash checked below).
  if (adopted ? v < held : v != held + 1)
    fail(say(site, " went from version ", held, " to ", v, adopted ? " by adopting a peer's state" : " by a commit"));
  holds_[site] = v;
  newest_ = std::max(newest_, v);
  const auto [it, fresh] = records_.try_emplace(v, record);
  if (!fresh && !(it->second == record))
    fail(say(site, " applied a record of version ", v, " proposed by ", record.proposer, " where another site applied ",
             it->second.proposer, "'s: two histories"));
  const auto [h, first] = hashes_.try_emplace(v, hash);
  if (!first && h->second != hash) fail(say(site, "'s weights of version ", v, " hash to ", hash, ", another's to ", h->second));
}

void Checker::restarted(const std::string& site, std::int64_t version) { holds_[site] = version; }

void Checker::finished(const std::string& site, std::int64_t version, std::span<const float> global, bool cut_off) {
  finals_[site] = {version, std::vector<float>(global.begin(), global.end()), cut_off};
}

void Checker::check_finals(const OuterState& state, bool log_end) {
  for (const auto& [site, final] : finals_) {
    if (final.version == state.version()) {
      if (!std::equal(final.global.begin(), final.global.end(), state.global().begin(), state.global().end()))
        fail(say(site, "'s final weights differ from the replay of the log at version ", state.version()));
    } else if (log_end && !final.cut_off) {
      fail(say(site, " finished at version ", final.version, ", the log ends at ", state.version(), ": versions lost"));
    } else if (log_end && final.version > state.version()) {
      fail(say(site, " ended cut off at version ", final.version, ", past the log's end at ", state.version()));
    }
  }
}

const std::vector<std::byte>* Checker::sent(const CommitEntry& e) const {
  const auto [begin, end] = sent_.equal_range({e.site, e.round});
  for (auto it = begin; it != end; ++it)
    if (delta_digest(std::span<const std::byte>(it->second)) == e.digest) return &it->second;
  return nullptr;
}

std::pair<std::vector<int>, std::vector<float>> Checker::mean_of(const CommitRecord& record,
                                                                 std::vector<DeltaScreen>& screens) const {
  std::set<int> fragments;
  for (const auto& e : record.entries) fragments.insert(e.fragment);
  std::pair<std::vector<int>, std::vector<float>> out;
  for (const int f : fragments) {
    const std::size_t n = plan_[static_cast<std::size_t>(f)].size;
    std::vector<std::vector<float>> decoded;
    std::vector<std::span<const float>> views;
    std::vector<double> weights;
    std::vector<CommitEntry> entries;
    for (const auto& e : record.entries) {
      if (e.fragment != f) continue;
      entries.push_back(e);
      decoded.emplace_back(n);
      decode(*sent(e), decoded.back());
      screens[static_cast<std::size_t>(f)].accept(DeltaScreen(screen_).check(decoded.back(), n).norm);
      views.emplace_back(decoded.back());
      weights.push_back(e.weight);
    }
    std::vector<float> mean(n);
    weighted_mean(views, weights, mean);
    if (const double share = commit_share(record.number, entries, record.round_tokens, rule_); share < 1.0)
      for (auto& x : mean) x = static_cast<float>(share * static_cast<double>(x));
    out.first.push_back(f);
    out.second.insert(out.second.end(), mean.begin(), mean.end());
  }
  return out;
}

void Checker::replay(const std::map<std::int64_t, CommitRecord>& log) {
  OuterState state(initial_, outer_, codec_, false, plan_);
  std::vector<DeltaScreen> screens(plan_.size(), DeltaScreen(screen_));
  std::size_t left = log.size();
  check_finals(state, left == 0);
  for (const auto& [v, record] : log) {
    for (const auto& e : record.entries)
      if (e.fragment < 0 || static_cast<std::size_t>(e.fragment) >= plan_.size())
        return fail(say("version ", v, " merges ", e.site, "'s round ", e.round, " of fragment ", e.fragment,
                        ", which the job does not have"));
    const auto [fragments, means] = mean_of(record, screens);
    for (std::size_t f = 0; f < screens.size(); ++f)
      if (record.screens.size() != screens.size() || record.screens[f] != screens[f].history())
        return fail(say("version ", v, "'s record carries a screen of fragment ", f,
                        " that is not the norms of the deltas the log merged"));
    auto outcome = state.preview(fragments, means);
    if (outcome.hash != record.params_hash) {
      fail(say("replaying the log, version ", v, " hashes to ", outcome.hash, ", its record says ", record.params_hash));
      return;
    }
    state.commit(v, std::move(outcome));
    check_finals(state, --left == 0);
  }
}

void Checker::check_log(const RoundKeys& keys, const std::vector<std::pair<std::string, std::string>>& store) {
  std::map<std::int64_t, CommitRecord> log;
  std::set<std::int64_t> unreadable;
  for (const auto& [key, value] : store) {
    const auto v = keys.version_of_commit(key);
    if (!key.starts_with(keys.commits()) || !v) continue;
    try {
      log[*v] = decode_commit(value);
    } catch (const Error&) {
      unreadable.insert(*v);
    }
  }
  std::int64_t expect = 1;
  for (const auto& [v, record] : log)
    if (v != expect++) return fail(say("the commit log skips from version ", expect - 2, " to ", v));
  const std::int64_t last = log.empty() ? 0 : log.rbegin()->first;
  if (!unreadable.empty() && *unreadable.begin() <= last)
    fail(say("version ", *unreadable.begin(), " is unreadable in the log, which goes on to ", last));
  if (last < newest_) fail(say("sites applied version ", newest_, ", the log ends at ", last));
  for (const auto& [v, record] : records_)
    if (const auto it = log.find(v); it != log.end() && !(it->second == record))
      fail(say("version ", v, " in the log is not the record the sites applied"));
  std::set<std::pair<std::string, std::int64_t>> merged;
  for (const auto& [v, record] : log)
    for (const auto& e : record.entries) {
      if (!merged.insert({e.site, e.round}).second) fail(say(e.site, "'s round ", e.round, " is merged twice, again in version ", v));
      if (sent(e) == nullptr)
        return fail(say("version ", v, " merges ", e.site, "'s round ", e.round, " with a digest of no bytes it sent"));
    }
  if (violations_.empty()) replay(log);
}

}  // namespace meridian
