#pragma once
// A Link that wraps another (the WAN emulator's shaping, the measurements) and passes through
// what it does not change: the address peers reach, the chunk size, recycled buffers, the link's
// counters.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/link/link.hpp"

namespace meridian {

class LinkDecorator : public Link {
 public:
  explicit LinkDecorator(std::unique_ptr<Link> inner) : inner_(std::move(inner)) {}
  std::string address() const override { return inner_->address(); }
  std::size_t chunk_bytes() const override { return inner_->chunk_bytes(); }
  void recycle(std::vector<std::byte> bytes) override { inner_->recycle(std::move(bytes)); }
  Counters counters() const override { return inner_->counters(); }

 protected:
  std::unique_ptr<Link> inner_;
};

}  // namespace meridian
