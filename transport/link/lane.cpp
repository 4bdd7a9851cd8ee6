#include "transport/link/lane.hpp"

#include <algorithm>
#include <chrono>

#include "transport/chunking/chunker.hpp"

namespace meridian {

Lane::Lane(std::unique_ptr<Link> link, std::uint16_t stripe_tag, CutPart cut_part, std::size_t keep)
    : link_(std::move(link)),
      stripe_tag_(stripe_tag),
      cut_part_(std::move(cut_part)),
      keep_(std::max<std::size_t>(keep, 1)) {}

void Lane::hold(std::shared_ptr<const std::vector<std::byte>> payload) {
  // The leader names a payload by its chunk hashes' total, taken with the same chunk size.
  const auto identity = total_hash_of(chunk_hashes(*payload, link_->chunk_bytes()).hashes);
  held_.push_back({identity, std::move(payload)});
  while (held_.size() > keep_) held_.pop_front();
}

std::size_t Lane::held_bytes() const {
  std::size_t bytes = 0;
  for (const auto& h : held_) bytes += h.bytes->size();
  return bytes;
}

bool Lane::carry(const StripeOrder& order) {
  const auto it = std::find_if(held_.begin(), held_.end(), [&](const Held& h) {
    return h.identity == order.payload_hash && h.bytes->size() == order.payload_bytes;
  });
  if (it == held_.end()) {
    ++figures_.missing;
    return false;
  }
  auto stripe =
      order.part_unit > 0 && cut_part_
          ? make_part_stripe(order.transfer_id, order.tag,
                             cut_part_(*it->bytes, order.index, order.count, order.part_unit), order.index, order.count)
          : make_stripe(order.transfer_id, order.tag, *it->bytes, order.index, order.count);
  ++figures_.stripes_sent;
  figures_.bytes_sent += stripe.size();
  link_->send(order.to, order.transfer_id, stripe_tag_, std::span<const std::byte>(stripe));
  return true;
}

std::vector<std::pair<std::string, std::vector<std::byte>>> Lane::take_stripes(std::size_t max) {
  std::vector<std::pair<std::string, std::vector<std::byte>>> out;
  while (out.size() < max) {
    auto r = link_->receive(std::chrono::milliseconds(0));
    if (!r) break;
    if (r->tag != stripe_tag_) {
      ++figures_.refused;
      link_->recycle(std::move(r->bytes));
      continue;
    }
    ++figures_.stripes_received;
    figures_.bytes_received += r->bytes.size();
    out.emplace_back(std::move(r->peer), std::move(r->bytes));
  }
  return out;
}

}  // namespace meridian
