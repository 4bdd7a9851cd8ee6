#pragma once
// Whom a link exchanges with. A frame names its sender itself (ZeroMQ's routing id, the address in
// a UCX header), so whoever reaches a link's port can claim any name. Two rules follow:
//  * a link opens a connection only where its caller sent, or to a listed peer: never to a name
//    that a message gives (a forged name would make the site dial an address of the sender's
//    choosing, and a thousand of them would spend its file descriptors);
//  * once its caller has listed the peers (the job's members' link addresses, as the control plane
//    lists them), frames from anyone else are refused before they hold any state, unless the
//    caller vouches for the sender (a member that joined since the list was made: the caller reads
//    the members again, at a bounded rate).
// Refused senders are kept by name for the caller's events, a bounded number of them.
// Thread-safe: the UCX link asks from its progress thread.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace meridian {

// A sender's name as a log may show it: at most PeerGate::kMaxNameChars, printable characters only
// (what a sender claims is anyone's bytes).
std::string printable_name(const std::string& name);
// Counts one refusal of `name` (printable already) in `refused`: a new name is kept while fewer
// than PeerGate::kMaxNamed are, else counted under PeerGate::kOtherSenders.
void note_refusal(std::map<std::string, std::uint64_t>& refused, const std::string& name);

class PeerGate {
 public:
  // Names kept of refused senders until taken; the rest are counted under kOtherSenders.
  static constexpr std::size_t kMaxNamed = 16;
  static constexpr std::size_t kMaxNameChars = 64;
  static inline const std::string kOtherSenders = "(other senders)";

  // Who vouches for a sender not listed (may be null): called on the thread that takes frames in,
  // without the gate's lock held, so it may set the peers again.
  using Vouch = std::function<bool(const std::string& sender)>;
  void set(std::set<std::string> peers, Vouch vouch);
  // Whether frames from `sender` are taken in: any sender until peers are set, then a listed one.
  bool admits(const std::string& sender) const;
  // The same for a frame that arrived, asking the voucher about a sender not listed: a sender
  // refused is counted and remembered.
  bool let_in(const std::string& sender);
  // Counts a frame the link refused for a reason of its own, under `name` (printable).
  void refuse(const std::string& name);
  // Whether a link may open a connection to `peer` for a message's sake (to re-request a chunk):
  // only a listed one.
  bool listed(const std::string& peer) const;
  // The refused senders since the last call (printable, shortened names) and their frame counts.
  std::map<std::string, std::uint64_t> take_refusals();

 private:
  mutable std::mutex mutex_;
  std::optional<std::set<std::string>> peers_;
  std::shared_ptr<const Vouch> vouch_;  // shared: a call in progress keeps it while set() replaces it
  std::map<std::string, std::uint64_t> refused_;
};

}  // namespace meridian
