#include "transport/link/peer_gate.hpp"

#include <utility>

namespace meridian {
std::string printable_name(const std::string& name) {
  std::string out;
  for (const char c : name.substr(0, PeerGate::kMaxNameChars)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (name.size() > PeerGate::kMaxNameChars) out += "...";
  return out;
}

void note_refusal(std::map<std::string, std::uint64_t>& refused, const std::string& name) {
  if (refused.contains(name) || refused.size() < PeerGate::kMaxNamed)
    ++refused[name];
  else
    ++refused[PeerGate::kOtherSenders];
}

void PeerGate::set(std::set<std::string> peers, Vouch vouch) {
  std::lock_guard lock(mutex_);
  peers_ = std::move(peers);
  vouch_ = vouch ? std::make_shared<const Vouch>(std::move(vouch)) : nullptr;
}

bool PeerGate::admits(const std::string& sender) const {
  std::lock_guard lock(mutex_);
  return !peers_ || peers_->contains(sender);
}

bool PeerGate::let_in(const std::string& sender) {
  if (admits(sender)) return true;
  std::shared_ptr<const Vouch> vouch;
  {
    std::lock_guard lock(mutex_);
    vouch = vouch_;
  }
  if (vouch && (*vouch)(sender)) return true;
  refuse(printable_name(sender));
  return false;
}

void PeerGate::refuse(const std::string& name) {
  std::lock_guard lock(mutex_);
  note_refusal(refused_, name);
}

bool PeerGate::listed(const std::string& peer) const {
  std::lock_guard lock(mutex_);
  return peers_ && peers_->contains(peer);
}

std::map<std::string, std::uint64_t> PeerGate::take_refusals() {
  std::lock_guard lock(mutex_);
  return std::exchange(refused_, {});
}

}  // namespace meridian
