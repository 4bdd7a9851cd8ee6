#include "crosssite/round/records.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/util/error.hpp"
#include "transport/schemas/round.capnp.h"
#include "transport/schemas/wire_bytes.hpp"

namespace meridian {
namespace {

std::string to_string(capnp::MallocMessageBuilder& message) {
  const auto bytes = message_bytes(message);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Reads a record of type R and hands its root to `read`, turning every malformation into Error(Peer).
template <class R, class F>
auto read_record(std::string_view bytes, const char* what, F&& read) {
  const auto words = aligned_words(std::as_bytes(std::span(bytes.data(), bytes.size())), what);
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 1 << 20;  // records are small; a commit lists one entry per site
    capnp::FlatArrayMessageReader reader(words, options);
    const auto rec = reader.getRoot<R>();
    if (rec.getVersion() != wire::ROUND_SCHEMA_VERSION)
      throw make_error(ErrorKind::Peer, what, " has schema version ", rec.getVersion(), ", expected ",
                       wire::ROUND_SCHEMA_VERSION);
    return read(rec);
  } catch (const kj::Exception& e) {
    throw make_error(ErrorKind::Peer, "malformed ", what, ": ", e.getDescription().cStr());
  }
}

// A commit lists an entry per delta it merges and, per site, the newest round merged: a few per
// site. Cap'n Proto lets a list of empty structs claim a million elements in a few bytes (each
// one charged a word against the traversal limit), and every element is a map insertion here: a
// 104-byte record took over 10 s to read under the sanitizers (fuzz/corpus/records). Refused
// instead, before any is read.
constexpr unsigned kMaxCommitList = 1u << 12;
constexpr unsigned kMaxScreenNorms = 1u << 10;  // a screen's window is 16 by default

std::uint32_t fragment_field(int fragment) {
  MERIDIAN_CHECK(fragment >= 0, "fragment=", fragment);
  return static_cast<std::uint32_t>(fragment);
}

// A fragment number no job can have is a peer's error, not a number to index with.
int fragment_of(std::uint32_t field, const char* what) {
  if (field > (1u << 20)) throw make_error(ErrorKind::Peer, what, " names fragment ", field);
  return static_cast<int>(field);
}

int rounds_of(std::uint32_t field) {
  if (field < 1 || field > (1u << 20))
    throw make_error(ErrorKind::Peer, "delta announcement spans ", field, " rounds (1 to ", 1u << 20, " expected)");
  return static_cast<int>(field);
}

capnp::Data::Reader data_of(const Digest& d) { return {reinterpret_cast<const kj::byte*>(d.data()), d.size()}; }

Digest digest_of(capnp::Data::Reader data, const char* what) {
  Digest d{};
  if (data.size() != d.size()) throw make_error(ErrorKind::Peer, what, " has a digest of ", data.size(), " bytes, not ", d.size());
  std::memcpy(d.data(), data.begin(), d.size());
  return d;
}

std::string padded(std::int64_t n) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%012lld", static_cast<long long>(n));
  return buf;
}

}  // namespace

std::string encode(const MemberRecord& r) {
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<wire::MemberRecord>();
  w.setVersion(wire::ROUND_SCHEMA_VERSION);
  w.setSite(r.site);
  w.setAddress(r.address);
  w.setIncarnation(r.incarnation);
  w.setPaused(r.paused);
  w.setEnded(r.ended);
  auto lanes = w.initLanes(static_cast<unsigned>(r.lanes.size()));
  for (unsigned i = 0; i < lanes.size(); ++i) lanes.set(i, r.lanes[i]);
  w.setPartsUnit(r.parts_unit);
  return to_string(message);
}

std::string encode(const DeltaAnnouncement& r) {
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<wire::DeltaAnnouncement>();
  w.setVersion(wire::ROUND_SCHEMA_VERSION);
  w.setSite(r.site);
  w.setRound(r.round);
  w.setBaseVersion(r.base_version);
  w.setTokens(r.tokens);
  w.setBytes(r.bytes);
  w.setDigest(data_of(r.digest));
  w.setFinal(r.final);
  w.setFragment(fragment_field(r.fragment));
  MERIDIAN_CHECK(r.rounds >= 1, "rounds=", r.rounds);
  w.setRounds(static_cast<std::uint32_t>(r.rounds));
  w.setWithdrawn(r.withdrawn);
  return to_string(message);
}

std::string encode(const CommitRecord& r) {
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<wire::CommitRecord>();
  w.setVersion(wire::ROUND_SCHEMA_VERSION);
  w.setNumber(r.number);
  auto entries = w.initEntries(static_cast<unsigned>(r.entries.size()));
  for (unsigned i = 0; i < r.entries.size(); ++i) {
    const auto& e = r.entries[i];
    entries[i].setSite(e.site);
    entries[i].setRound(e.round);
    entries[i].setBaseVersion(e.base_version);
    entries[i].setWeight(e.weight);
    entries[i].setDigest(data_of(e.digest));
    entries[i].setFragment(fragment_field(e.fragment));
  }
  w.setParamsHash(r.params_hash);
  w.setProposer(r.proposer);
  auto merged = w.initMerged(static_cast<unsigned>(r.merged.size()));
  unsigned i = 0;
  for (const auto& [site, round] : r.merged) {
    merged[i].setSite(site);
    merged[i++].setRound(round);
  }
  w.setFragment(fragment_field(r.fragment));
  w.setRoundTokens(r.round_tokens);
  auto screens = w.initScreens(static_cast<unsigned>(r.screens.size()));
  for (unsigned f = 0; f < r.screens.size(); ++f) {
    auto norms = screens.init(f, static_cast<unsigned>(r.screens[f].size()));
    for (unsigned j = 0; j < r.screens[f].size(); ++j) norms.set(j, r.screens[f][j]);
  }
  if (r.previous != Digest{}) w.setPrevious(data_of(r.previous));
  return to_string(message);
}

std::string encode(const Vouch& r) {
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<wire::Vouch>();
  w.setVersion(wire::ROUND_SCHEMA_VERSION);
  w.setSite(r.site);
  w.setVouched(r.version);
  w.setDigest(data_of(r.digest));
  return to_string(message);
}

std::string encode(const DeltaDispute& r) {
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<wire::DeltaDispute>();
  w.setVersion(wire::ROUND_SCHEMA_VERSION);
  w.setSite(r.site);
  w.setRound(r.round);
  w.setBy(r.by);
  w.setAnnounced(data_of(r.announced));
  w.setSeen(data_of(r.seen));
  return to_string(message);
}

std::string encode(const StateRequest& r) {
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<wire::StateRequest>();
  w.setVersion(wire::ROUND_SCHEMA_VERSION);
  w.setMinVersion(r.min_version);
  return to_string(message);
}

std::string encode(const DeltaRequest& r) {
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<wire::DeltaRequest>();
  w.setVersion(wire::ROUND_SCHEMA_VERSION);
  w.setSite(r.site);
  w.setRound(r.round);
  return to_string(message);
}

MemberRecord decode_member(std::string_view bytes) {
  return read_record<wire::MemberRecord>(bytes, "member record", [](auto rec) {
    MemberRecord m{rec.getSite(), rec.getAddress(), rec.getIncarnation(), rec.getPaused(), rec.getEnded(), {}};
    for (const auto lane : rec.getLanes()) m.lanes.emplace_back(lane.cStr());
    m.parts_unit = rec.getPartsUnit();
    return m;
  });
}

DeltaAnnouncement decode_announcement(std::string_view bytes) {
  return read_record<wire::DeltaAnnouncement>(bytes, "delta announcement", [](auto rec) {
    return DeltaAnnouncement{rec.getSite(),     rec.getRound(),    rec.getBaseVersion(),
                             rec.getTokens(),   rec.getBytes(),    digest_of(rec.getDigest(), "delta announcement"),
                             rec.getFinal(),    fragment_of(rec.getFragment(), "delta announcement"),
                             rounds_of(rec.getRounds()), rec.getWithdrawn()};
  });
}

CommitRecord decode_commit(std::string_view bytes) {
  return read_record<wire::CommitRecord>(bytes, "commit record", [](auto rec) {
    CommitRecord r;
    r.number = rec.getNumber();
    if (rec.getEntries().size() > kMaxCommitList || rec.getMerged().size() > kMaxCommitList)
      throw make_error(ErrorKind::Peer, "commit record ", r.number, " lists ", rec.getEntries().size(), " entries and ",
                       rec.getMerged().size(), " merged rounds (at most ", kMaxCommitList, " of each)");
    for (auto e : rec.getEntries())
      r.entries.push_back({e.getSite(), e.getRound(), e.getBaseVersion(), e.getWeight(),
                           digest_of(e.getDigest(), "commit entry"),
                           fragment_of(e.getFragment(), "commit entry")});
    r.params_hash = rec.getParamsHash();
    r.proposer = rec.getProposer();
    for (auto m : rec.getMerged()) r.merged[m.getSite()] = m.getRound();
    r.fragment = fragment_of(rec.getFragment(), "commit record");
    r.round_tokens = rec.getRoundTokens();
    if (!std::isfinite(r.round_tokens) || r.round_tokens < 0)
      throw make_error(ErrorKind::Peer, "commit record ", r.number, " says a round holds ", r.round_tokens, " tokens");
    if (rec.getScreens().size() > kMaxCommitList)
      throw make_error(ErrorKind::Peer, "commit record ", r.number, " holds ", rec.getScreens().size(),
                       " fragments' screens (at most ", kMaxCommitList, ")");
    for (auto norms : rec.getScreens()) {
      if (norms.size() > kMaxScreenNorms)
        throw make_error(ErrorKind::Peer, "commit record ", r.number, " holds a screen of ", norms.size(),
                         " norms (at most ", kMaxScreenNorms, ")");
      auto& screen = r.screens.emplace_back();
      for (const double n : norms) {
        if (!std::isfinite(n) || n < 0)
          throw make_error(ErrorKind::Peer, "commit record ", r.number, " holds an impossible norm ", n,
                           " in the screen of fragment ", r.screens.size() - 1);
        screen.push_back(n);
      }
    }
    if (rec.hasPrevious()) r.previous = digest_of(rec.getPrevious(), "commit record's previous");
    return r;
  });
}

Vouch decode_vouch(std::string_view bytes) {
  return read_record<wire::Vouch>(bytes, "vouch", [](auto rec) {
    if (rec.getVouched() < 1) throw make_error(ErrorKind::Peer, "a vouch for version ", rec.getVouched());
    return Vouch{rec.getSite(), rec.getVouched(), digest_of(rec.getDigest(), "vouch")};
  });
}

DeltaDispute decode_dispute(std::string_view bytes) {
  return read_record<wire::DeltaDispute>(bytes, "delta dispute", [](auto rec) {
    return DeltaDispute{rec.getSite(), rec.getRound(), rec.getBy(), digest_of(rec.getAnnounced(), "delta dispute"),
                        digest_of(rec.getSeen(), "delta dispute")};
  });
}

DeltaRequest decode_delta_request(std::string_view bytes) {
  return read_record<wire::DeltaRequest>(bytes, "delta request",
                                         [](auto rec) { return DeltaRequest{rec.getSite(), rec.getRound()}; });
}

StateRequest decode_state_request(std::string_view bytes) {
  return read_record<wire::StateRequest>(bytes, "state request",
                                         [](auto rec) { return StateRequest{rec.getMinVersion()}; });
}

std::string RoundKeys::delta(const std::string& site, std::int64_t round) const {
  return deltas() + site + "/" + padded(round);
}

std::string RoundKeys::dispute(const std::string& site, std::int64_t round, const std::string& by) const {
  return deltas() + by + std::string(kDisputes) + site + "/" + padded(round);
}

std::string RoundKeys::commit(std::int64_t version) const { return commits() + padded(version); }

std::optional<std::int64_t> RoundKeys::version_of_commit(std::string_view key) const {
  const std::string prefix = commits();
  if (!key.starts_with(prefix)) return std::nullopt;
  const auto digits = key.substr(prefix.size());
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || v < 0 || commit(v) != key) return std::nullopt;
  return v;
}

}  // namespace meridian
