// A split exchange's stripes as a site's leader takes them in (transport/link/stripes.hpp): from
// its own link and from its replicas' lanes, any bytes a peer's lane sends. The input is a script
// of steps from three senders:
//   - raw stripes (the bytes as given), which mostly test read_stripe;
//   - stripes of a genuine transfer of input bytes, cut into 1 to 6 by make_stripe, fed in an
//     order the input picks, with duplicates, from a sender no raw stripe claims to be.
// Promises checked: a read stripe's bytes are its share of the total; a genuine transfer, when
// delivered, holds exactly the bytes sent, as the transfer and tag it was cut from; the assembler
// keeps no more open transfers than its bound; nothing throws but Error.
#include <map>
#include <optional>
#include <utility>

#include "fuzz/fuzz_common.hpp"
#include "transport/link/stripes.hpp"

namespace {

using namespace meridian;
using meridian::fuzz::Input;

const std::string kStripeSenders[] = {"tcp://a:1", "tcp://b:2"};
const std::string kGenuine = "tcp://sender:3";
constexpr std::size_t kMaxOpen = 4;

struct Script {
  StripeAssembler assembler{kMaxOpen, 1 << 20};
  std::map<std::uint64_t, std::pair<std::uint16_t, std::vector<std::byte>>> genuine;  // id -> what was cut
  std::uint64_t next_id = 0;

  void take(const std::string& sender, std::span<const std::byte> bytes) {
    try {
      const Stripe s = read_stripe(bytes);
      const auto [first, last] = stripe_bounds(s.total_bytes, s.index, s.count);
      MERIDIAN_FUZZ_EXPECT(s.bytes.size() == last - first, "stripe ", s.index, " of ", s.count, " holds ", s.bytes.size());
      const auto whole = assembler.add(sender, s);
      MERIDIAN_FUZZ_EXPECT(assembler.open() <= kMaxOpen, assembler.open(), " transfers open");
      if (!whole || sender != kGenuine) return;
      const auto it = genuine.find(whole->transfer_id);
      MERIDIAN_FUZZ_EXPECT(it != genuine.end(), "transfer ", whole->transfer_id, " was never cut");
      MERIDIAN_FUZZ_EXPECT(whole->tag == it->second.first && whole->bytes == it->second.second, "transfer ",
                           whole->transfer_id, " delivered ", whole->bytes.size(), " bytes other than the ",
                           it->second.second.size(), " cut");
    } catch (const Error&) {
      // Refused: a peer's bad bytes.
    }
  }

  void genuine_transfer(Input& in) {
    const std::uint64_t id = next_id++;  // a sender never cuts two payloads under one id
    const auto tag = in.take<std::uint16_t>();
    const int count = 1 + in.take<std::uint8_t>() % 6;
    const auto payload = in.piece();
    genuine[id] = {tag, {payload.begin(), payload.end()}};
    const auto feeds = 1 + in.take<std::uint8_t>() % 12;
    for (int k = 0; k < feeds; ++k) {
      const int index = in.take<std::uint8_t>() % count;
      take(kGenuine, make_stripe(id, tag, payload, index, count));
    }
  }
};

}  // namespace

int meridian_fuzz_stripes(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  Script s;
  for (int op = 0; op < 256 && !in.empty(); ++op) {
    const auto how = in.take<std::uint8_t>();
    if (how & 1) s.genuine_transfer(in);
    else
      s.take(kStripeSenders[(how >> 1) % 2], in.piece());
  }
  return 0;
}

MERIDIAN_FUZZ_TARGET(stripes)
