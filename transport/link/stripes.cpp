#include "transport/link/stripes.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <cstring>

#include "core/util/error.hpp"
#include "transport/schemas/chunk.capnp.h"
#include "transport/schemas/wire_bytes.hpp"

namespace meridian {
namespace {

// An encoded header is a few words; anything much larger is not one.
constexpr std::uint32_t kMaxHeaderBytes = 256;

}  // namespace

std::pair<std::uint64_t, std::uint64_t> stripe_bounds(std::uint64_t total, int index, int count) {
  MERIDIAN_CHECK(count >= 1 && count <= kMaxStripes && index >= 0 && index < count, "stripe ", index, " of ", count);
  // In 128 bits: total * index overflows 64 from 2^56 bytes on, a size a peer may claim.
  const auto at = [&](int i) {
    return static_cast<std::uint64_t>(static_cast<unsigned __int128>(total) * static_cast<unsigned>(i) /
                                      static_cast<unsigned>(count));
  };
  return {at(index), at(index + 1)};
}

namespace {

// A length-prefixed header, then `bytes`.
std::vector<std::byte> stripe_of(std::uint64_t transfer_id, std::uint16_t tag, int index, int count,
                                 std::uint64_t total_bytes, bool part, std::span<const std::byte> bytes) {
  MERIDIAN_CHECK(count >= 1 && count <= kMaxStripes && index >= 0 && index < count, "stripe ", index, " of ", count);
  capnp::MallocMessageBuilder message;
  auto h = message.initRoot<wire::StripeHeader>();
  h.setVersion(wire::STRIPE_SCHEMA_VERSION);
  h.setTransferId(transfer_id);
  h.setTag(tag);
  h.setIndex(static_cast<std::uint16_t>(index));
  h.setCount(static_cast<std::uint16_t>(count));
  h.setTotalBytes(total_bytes);
  h.setPart(part);
  const auto header = message_bytes(message);
  const auto length = static_cast<std::uint32_t>(header.size());
  std::vector<std::byte> out(sizeof length + header.size() + bytes.size());
  for (std::size_t b = 0; b < sizeof length; ++b) out[b] = static_cast<std::byte>(length >> (8 * b));
  std::memcpy(out.data() + sizeof length, header.data(), header.size());
  std::memcpy(out.data() + sizeof length + header.size(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

std::vector<std::byte> make_stripe(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> payload,
                                   int index, int count) {
  const auto [first, last] = stripe_bounds(payload.size(), index, count);
  return stripe_of(transfer_id, tag, index, count, payload.size(), false, payload.subspan(first, last - first));
}

std::vector<std::byte> make_part_stripe(std::uint64_t transfer_id, std::uint16_t tag, std::span<const std::byte> part,
                                        int index, int count) {
  return stripe_of(transfer_id, tag, index, count, 0, true, part);
}

Stripe read_stripe(std::span<const std::byte> payload) {
  std::uint32_t length = 0;
  if (payload.size() < sizeof length) throw make_error(ErrorKind::Peer, "a stripe of ", payload.size(), " bytes");
  for (std::size_t b = 0; b < sizeof length; ++b) length |= std::to_integer<std::uint32_t>(payload[b]) << (8 * b);
  if (length > kMaxHeaderBytes || length > payload.size() - sizeof length)
    throw make_error(ErrorKind::Peer, "a stripe's header claims ", length, " bytes of ", payload.size());
  Stripe s;
  const auto words = aligned_words(payload.subspan(sizeof length, length), "a stripe header");
  try {
    capnp::FlatArrayMessageReader reader(words, capnp::ReaderOptions{kMaxHeaderBytes / sizeof(capnp::word), 4});
    const auto h = reader.getRoot<wire::StripeHeader>();
    if (h.getVersion() != wire::STRIPE_SCHEMA_VERSION)
      throw make_error(ErrorKind::Peer, "a stripe header of schema version ", h.getVersion(), ", expected ",
                       wire::STRIPE_SCHEMA_VERSION);
    s = Stripe{h.getTransferId(), h.getTag(), h.getIndex(), h.getCount(), h.getTotalBytes(), {}, h.getPart()};
  } catch (const kj::Exception& e) {
    throw make_error(ErrorKind::Peer, "a malformed stripe header: ", e.getDescription().cStr());
  }
  if (s.count < 1 || s.count > kMaxStripes || s.index >= s.count)
    throw make_error(ErrorKind::Peer, "a stripe numbered ", s.index, " of ", s.count);
  s.bytes = payload.subspan(sizeof length + length);
  if (s.part) return s;
  const auto [first, last] = stripe_bounds(s.total_bytes, s.index, s.count);
  if (s.bytes.size() != last - first)
    throw make_error(ErrorKind::Peer, "stripe ", s.index, " of ", s.count, " of a ", s.total_bytes,
                     "-byte transfer holds ", s.bytes.size(), " bytes, its share is ", last - first);
  return s;
}

std::optional<Received> StripeAssembler::add(const std::string& sender, const Stripe& stripe) {
  if (stripe.part)
    throw make_error(ErrorKind::Peer, "part ", stripe.index, " of ", stripe.count, " of transfer ", stripe.transfer_id,
                     " from ", sender, " where only shares of bytes are put together");
  const Key key{sender, stripe.transfer_id};
  auto it = open_.find(key);
  if (it == open_.end()) {
    if (stripe.total_bytes > max_bytes_)
      throw make_error(ErrorKind::Peer, "a striped transfer of ", stripe.total_bytes, " bytes from ", sender,
                       ", more than the ", max_bytes_, " taken");
    if (open_.size() >= max_open_) {
      const auto oldest = std::min_element(open_.begin(), open_.end(), [](const auto& a, const auto& b) {
        return a.second.opened < b.second.opened;
      });
      open_.erase(oldest);
      ++dropped_;
    }
    Open o{stripe.tag, stripe.count, std::vector<std::byte>(stripe.total_bytes),
           std::vector<bool>(static_cast<std::size_t>(stripe.count)), stripe.count, opened_++};
    it = open_.emplace(key, std::move(o)).first;
  }
  Open& o = it->second;
  if (o.tag != stripe.tag || o.count != stripe.count || o.bytes.size() != stripe.total_bytes) {
    open_.erase(it);
    throw make_error(ErrorKind::Peer, "stripe ", stripe.index, " of transfer ", stripe.transfer_id, " from ", sender,
                     " disagrees with the stripes before it (tag, count or size)");
  }
  if (o.have[static_cast<std::size_t>(stripe.index)]) return std::nullopt;
  const auto first = stripe_bounds(stripe.total_bytes, stripe.index, stripe.count).first;
  std::copy(stripe.bytes.begin(), stripe.bytes.end(), o.bytes.begin() + static_cast<std::ptrdiff_t>(first));
  o.have[static_cast<std::size_t>(stripe.index)] = true;
  if (--o.missing > 0) return std::nullopt;
  Received whole{sender, stripe.transfer_id, o.tag, std::move(o.bytes)};
  open_.erase(it);
  return whole;
}

}  // namespace meridian
