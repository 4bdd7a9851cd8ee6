#pragma once
// For a test's stand-in link: the shared and pre-hashed send forms go through the copying one, so
// a fake implements one send (and the chunk size it claims) rather than three. It takes from
// everyone: a fake has no peers to refuse.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "transport/link/link.hpp"

namespace meridian::testing {

class CopyingLink : public Link {
 public:
  using Link::send;
  void send(const std::string& peer, std::uint64_t id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload) override {
    send(peer, id, tag, std::span<const std::byte>(*payload));
  }
  void send(const std::string& peer, std::uint64_t id, std::uint16_t tag,
            std::shared_ptr<const std::vector<std::byte>> payload, ChunkHashes) override {
    send(peer, id, tag, std::span<const std::byte>(*payload));
  }
  void set_peers(std::set<std::string>, std::function<bool(const std::string&)>) override {}
  std::map<std::string, std::uint64_t> take_refusals() override { return {}; }
};

}  // namespace meridian::testing
