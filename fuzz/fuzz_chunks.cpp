// The receiving side of every link (transport/link/incoming.hpp over transport/chunking): chunk
// headers as they come off the wire, and the transfers they are assembled into. The input is a
// script of frames from three senders:
//   - raw frames (header and payload bytes as given), which mostly test decode_chunk_header;
//   - forged frames whose header fields the input chooses (encoded, so they pass the header hash;
//     the payload hash right or wrong as the input says): what a broken or hostile peer can send,
//     through every path a link has (a frame, a payload sent ahead of its header and its header,
//     a place claimed for a payload, written and landed or dropped);
//   - a genuine transfer of input bytes cut by make_frames, whose frames go in an order, with
//     duplicates and through the paths the input picks.
// Promises checked: a decoded header encodes and decodes to itself; a genuine transfer, when
// delivered, holds exactly the bytes sent, whatever forged frames were mixed in; nothing throws.
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "fuzz/fuzz_common.hpp"
#include "transport/chunking/assembler.hpp"
#include "transport/chunking/chunker.hpp"
#include "transport/link/incoming.hpp"

namespace {

using namespace meridian;
using meridian::fuzz::Input;

const std::string kSenders[] = {"tcp://a:1", "tcp://b:2", "tcp://sender:3"};

struct Script {
  IncomingTransfers incoming;
  Link::Counters counters;
  std::deque<std::shared_ptr<IncomingTransfers::Claim>> claims;
  std::map<std::pair<std::string, std::uint64_t>, std::vector<std::byte>> genuine;  // what each genuine transfer sent
  std::set<std::pair<std::string, std::uint64_t>> touched;                         // transfers any frame named

  void take(IncomingTransfers::Outcome outcome) {
    if (!outcome.delivered) return;
    Received& r = *outcome.delivered;
    if (const auto it = genuine.find({r.peer, r.transfer_id}); it != genuine.end())
      MERIDIAN_FUZZ_EXPECT(r.bytes == it->second, "transfer ", r.transfer_id, " from ", r.peer, " delivered ",
                           r.bytes.size(), " bytes other than the ", it->second.size(), " sent");
    incoming.recycle(std::move(r.bytes));
  }

  // Writes `fill` (as much as fits) into a claimed place and lands it.
  void land(std::shared_ptr<IncomingTransfers::Claim> claim, std::span<const std::byte> fill) {
    const auto bytes = claim->bytes();
    const std::size_t n = std::min(fill.size(), bytes.size());
    if (n > 0) std::memcpy(bytes.data(), fill.data(), n);
    std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(n), bytes.end(), std::byte{0});  // the transport wrote them all
    take(incoming.landed(claim, counters));
  }

  void hold(std::optional<IncomingTransfers::Place> place, Input& in) {
    if (!place) return;
    MERIDIAN_FUZZ_EXPECT(place->claim && place->bytes.data() == place->claim->bytes().data());
    if (in.take<std::uint8_t>() & 1) return land(place->claim, in.bytes(place->bytes.size()));
    claims.push_back(std::move(place->claim));  // landed or dropped by a later step
    if (claims.size() > 4) claims.pop_front();  // the receive failed: its place is free again
  }
};

// Header fields the input chooses, small enough that a transfer fits in memory.
ChunkHeader forged_header(Input& in) {
  ChunkHeader h;
  h.transfer_id = in.take<std::uint8_t>() % 4;
  h.tag = in.take<std::uint8_t>();
  h.index = in.take<std::uint8_t>();
  h.count = in.take<std::uint8_t>();
  h.total_bytes = in.take<std::uint16_t>();
  h.offset = in.take<std::uint16_t>();
  h.length = in.take<std::uint16_t>();
  h.payload_hash = in.take<std::uint64_t>();
  h.total_hash = in.take<std::uint64_t>();
  return h;
}

Assembler::Placement placement_of(const ChunkHeader& h) {
  return {h.transfer_id, h.index, h.count, h.total_bytes, h.offset, h.length};
}

void raw_frame(Script& s, const std::string& peer, Input& in) {
  const auto header = in.piece();
  const auto payload = in.piece();
  try {
    const ChunkHeader h = decode_chunk_header(header);
    const ChunkHeader again = decode_chunk_header(encode_chunk_header(h));
    MERIDIAN_FUZZ_EXPECT(again.transfer_id == h.transfer_id && again.tag == h.tag && again.index == h.index &&
                         again.count == h.count && again.total_bytes == h.total_bytes && again.offset == h.offset &&
                         again.length == h.length && again.payload_hash == h.payload_hash &&
                         again.total_hash == h.total_hash, "a chunk header changed in a round trip");
    s.touched.insert({peer, h.transfer_id});
  } catch (const Error&) {
  }
  if (in.take<std::uint8_t>() & 1)
    s.take(s.incoming.confirm(peer, header, s.counters));
  else
    s.take(s.incoming.add(peer, header, payload, s.counters));
}

void forged_frame(Script& s, const std::string& peer, std::uint8_t how, Input& in) {
  ChunkHeader h = forged_header(in);
  const auto payload = in.bytes(in.take<std::uint16_t>());
  if (how & 0x10) h.payload_hash = payload_hash(payload);
  s.touched.insert({peer, h.transfer_id});
  const auto header = encode_chunk_header(h);
  switch ((how >> 5) % 6) {
    case 0: return s.take(s.incoming.add(peer, header, payload, s.counters));
    case 1: return s.take(s.incoming.add(peer, placement_of(h), payload, s.counters));
    case 2: return s.take(s.incoming.confirm(peer, header, s.counters));
    case 3: return s.hold(s.incoming.place(peer, header, in.take<std::uint16_t>()), in);
    case 4: return s.hold(s.incoming.place(peer, placement_of(h), in.take<std::uint16_t>()), in);
    case 5: {  // a payload sent ahead, then its header
      s.take(s.incoming.add(peer, placement_of(h), payload, s.counters));
      return s.take(s.incoming.confirm(peer, header, s.counters));
    }
  }
}

void genuine_transfer(Script& s, Input& in) {
  const std::string& peer = kSenders[2];
  const std::uint64_t id = in.take<std::uint8_t>() % 4;
  const std::uint16_t tag = in.take<std::uint16_t>();
  const std::size_t chunk_bytes = 1 + in.take<std::uint8_t>();
  auto payload = in.piece();
  payload = payload.first(std::min<std::size_t>(payload.size(), 4096));
  const int steps = in.take<std::uint8_t>() % 64;
  if (!s.touched.insert({peer, id}).second) return;  // only a transfer of its own is checked whole
  s.genuine[{peer, id}].assign(payload.begin(), payload.end());
  const auto frames = make_frames(id, tag, payload, chunk_bytes, /*parallel=*/false);
  for (int step = 0; step < steps && !in.empty(); ++step) {
    const auto& f = frames[in.take<std::uint8_t>() % frames.size()];
    const ChunkHeader h = decode_chunk_header(f.header);  // its own frames: a failure here is a finding
    switch (in.take<std::uint8_t>() % 4) {
      case 0: s.take(s.incoming.add(peer, f.header, f.payload, s.counters)); break;
      case 1:
        s.take(s.incoming.add(peer, placement_of(h), f.payload, s.counters));
        s.take(s.incoming.confirm(peer, f.header, s.counters));
        break;
      case 2:
        if (auto place = s.incoming.place(peer, f.header, f.payload.size())) s.land(place->claim, f.payload);
        break;
      case 3:
        if (auto place = s.incoming.place(peer, placement_of(h), f.payload.size())) {
          s.land(place->claim, f.payload);
          s.take(s.incoming.confirm(peer, f.header, s.counters));
        }
        break;
    }
  }
}

}  // namespace

int meridian_fuzz_chunks(const std::uint8_t* data, std::size_t size) {
  using namespace meridian;
  using meridian::fuzz::Input;
  Input in(data, size);
  Script s;
  for (int op = 0; op < 256 && !in.empty(); ++op) {
    const auto how = in.take<std::uint8_t>();
    const std::string& peer = kSenders[(how >> 2) % 3];
    switch (how & 3) {
      case 0: raw_frame(s, peer, in); break;
      case 1: forged_frame(s, peer, how, in); break;
      case 2: genuine_transfer(s, in); break;
      case 3:  // a claim held so far: its payload written and landed, or its receive failed
        if (s.claims.empty()) break;
        if (how & 0x10) s.land(s.claims.front(), in.piece());
        s.claims.pop_front();
        break;
    }
  }
  return 0;
}

MERIDIAN_FUZZ_TARGET(chunks)
