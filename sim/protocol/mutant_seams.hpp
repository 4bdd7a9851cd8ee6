#pragma once
// Deliberate bugs made on the seams a site runs over, so that production code carries no switch
// for them: a control plane whose proposals overwrite commit records, a link that sends one peer
// other bytes than its site announced, and peers that hand an adopted version out again. The simulator's tests (and test_cross_site's
// equivocation case) must catch each one.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "crosssite/control/control_plane.hpp"
#include "crosssite/round/delta_journal.hpp"
#include "crosssite/round/records.hpp"
#include "crosssite/round/round_peers.hpp"
#include "transport/chunking/chunker.hpp"
#include "transport/link/link.hpp"

namespace meridian {

// A proposal overwrites a version's commit record instead of creating it (create-if-absent of a
// commit key becomes a put): two sites can then both believe their own version won.
class OverwritingControlPlane final : public ControlPlane {
 public:
  explicit OverwritingControlPlane(ControlPlane& inner) : inner_(inner) {}
  void put(const std::string& key, const std::string& value, std::int64_t lease) override { inner_.put(key, value, lease); }
  std::optional<std::string> get(const std::string& key) override { return inner_.get(key); }
  std::vector<std::pair<std::string, std::string>> get_prefix(const std::string& prefix) override {
    return inner_.get_prefix(prefix);
  }
  PrefixRead get_prefix_since(const std::string& prefix, std::int64_t since) override {
    return inner_.get_prefix_since(prefix, since);
  }
  bool create_if_absent(const std::string& key, const std::string& value) override {
    if (key.find("/commits/") == std::string::npos) return inner_.create_if_absent(key, value);
    inner_.put(key, value);
    return true;
  }
  bool compare_and_swap(const std::string& key, const std::string& expected, const std::string& value) override {
    return inner_.compare_and_swap(key, expected, value);
  }
  std::int64_t grant_lease(std::int64_t ttl_seconds) override { return inner_.grant_lease(ttl_seconds); }
  void keep_alive(std::int64_t lease) override { inner_.keep_alive(lease); }
  void revoke_lease(std::int64_t lease) override { inner_.revoke_lease(lease); }

 private:
  ControlPlane& inner_;
};

// An equivocating site: every delta (or stripe of one) it sends to a peer at an address `victim`
// accepts goes with one byte flipped and chunk hashes that match the forgery, so the victim's link delivers it whole
// and only the announced digest can tell.
class ForgingLink final : public Link {
 public:
  ForgingLink(std::unique_ptr<Link> inner, std::function<bool(const std::string& address)> victim)
      : inner_(std::move(inner)), victim_(std::move(victim)) {}

  std::string address() const override { return inner_->address(); }
  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::span<const std::byte> payload) override {
    send(peer, transfer_id, tag, std::make_shared<const std::vector<std::byte>>(payload.begin(), payload.end()));
  }
  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload) override {
    send(peer, transfer_id, tag, payload, chunk_hashes(*payload, chunk_bytes()));
  }
  void send(const std::string& peer, std::uint64_t transfer_id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes hashes) override {
    const bool stripe = tag == static_cast<std::uint16_t>(LinkTag::Stripe);
    if ((tag != static_cast<std::uint16_t>(LinkTag::Delta) && !stripe) || payload->empty() || !victim_(peer))
      return inner_->send(peer, transfer_id, tag, std::move(payload), std::move(hashes));
    auto forged = std::make_shared<std::vector<std::byte>>(*payload);
    // A stripe's header comes first: its last byte is the delta's.
    (*forged)[stripe ? forged->size() - 1 : forged->size() / 2] ^= std::byte{0x01};
    auto forged_hashes = chunk_hashes(*forged, chunk_bytes());
    inner_->send(peer, transfer_id, tag, std::move(forged), std::move(forged_hashes));
  }
  std::size_t chunk_bytes() const override { return inner_->chunk_bytes(); }
  std::optional<Received> receive(std::chrono::milliseconds timeout) override { return inner_->receive(timeout); }
  void recycle(std::vector<std::byte> bytes) override { inner_->recycle(std::move(bytes)); }
  Counters counters() const override { return inner_->counters(); }
  void set_peers(std::set<std::string> peers, std::function<bool(const std::string&)> vouch) override {
    inner_->set_peers(std::move(peers), std::move(vouch));
  }
  std::map<std::string, std::uint64_t> take_refusals() override { return inner_->take_refusals(); }

 private:
  std::unique_ptr<Link> inner_;
  std::function<bool(const std::string&)> victim_;
};

// After a peer's state is adopted, its version is handed out again as a commit (of nothing): a
// site must never apply a version it holds already.
class ReapplyingPeers final : public RoundPeers {
 public:
  explicit ReapplyingPeers(RoundPeers& inner) : inner_(inner) {}
  std::int64_t next_round() const override { return inner_.next_round(); }
  std::size_t chunk_bytes() const override { return inner_.chunk_bytes(); }
  void submit(const DeltaAnnouncement& a, std::vector<std::byte> encoded, ChunkHashes hashes) override {
    inner_.submit(a, std::move(encoded), std::move(hashes));
  }
  std::optional<VersionCommit> poll_commit(const OuterState& state, std::chrono::milliseconds budget) override {
    if (adopted_) {
      VersionCommit again{
          *std::exchange(adopted_, std::nullopt), std::vector<float>(state.fragment(0).size), {}, {0}, {}, false, {}};
      return again;
    }
    auto commit = inner_.poll_commit(state, budget);
    if (commit && !commit->snapshot.empty()) adopted_ = commit->record;
    return commit;
  }
  std::optional<std::int64_t> lost_round(const OuterState& state, std::int64_t after) const override {
    return inner_.lost_round(state, after);
  }
  bool unmergeable(const OuterState& state, std::int64_t round) const override { return inner_.unmergeable(state, round); }
  bool disputed() const override { return inner_.disputed(); }
  void diverged(std::int64_t version, const std::string& why) override { inner_.diverged(version, why); }
  std::optional<std::uint64_t> held_hash(std::int64_t version) const override { return inner_.held_hash(version); }
  std::int64_t backlog(const OuterState& state) const override { return inner_.backlog(state); }
  bool finished(const OuterState& state) override { return inner_.finished(state); }
  std::int64_t newest_commit() const override { return inner_.newest_commit(); }
  std::int64_t peers_newest_round() const override { return inner_.peers_newest_round(); }
  void leave() override { inner_.leave(); }
  void stop_announcing() override { inner_.stop_announcing(); }
  std::optional<ProposalPreview> take_preview() override { return inner_.take_preview(); }
  void previewed(std::uint64_t hash) override { inner_.previewed(hash); }
  bool state_wanted() const override { return inner_.state_wanted(); }
  void state_assembled(std::int64_t version, std::vector<std::byte> snapshot) override {
    inner_.state_assembled(version, std::move(snapshot));
  }

 private:
  RoundPeers& inner_;
  std::optional<CommitRecord> adopted_;
};

// A journal that keeps no commit records (one written before records were kept, or whose record
// files were removed): a restarted site's own vouch alone then names the record it applied.
class RecordlessJournal final : public DeltaJournal {
 public:
  explicit RecordlessJournal(std::shared_ptr<DeltaJournal> inner) : inner_(std::move(inner)) {}
  void write(const Key& key, std::span<const std::byte> bytes) override { inner_->write(key, bytes); }
  void write_part(const Key& key, int index, int count, std::span<const std::byte> bytes) override {
    inner_->write_part(key, index, count, bytes);
  }
  void erase_through(const std::string& site, std::int64_t round) override { inner_->erase_through(site, round); }
  void erase(const Key& key) override { inner_->erase(key); }
  std::map<Key, std::vector<std::byte>> load() const override { return inner_->load(); }
  std::optional<std::vector<std::byte>> read(const Key& key) const override { return inner_->read(key); }
  void write_record(std::int64_t, const std::string&) override {}
  void erase_records_before(std::int64_t) override {}
  std::map<std::int64_t, std::string> records() const override { return {}; }

 private:
  std::shared_ptr<DeltaJournal> inner_;
};

}  // namespace meridian
