// The control plane's records (crosssite/round/records.hpp), as read from etcd and from a peer's link:
// the first byte picks the decoder, the rest is the record's bytes. A record that decodes must
// encode again, and that encoding must decode to the same record (compared as bytes, so a NaN
// weight compares equal to itself).
#include "fuzz/fuzz_common.hpp"
#include "crosssite/round/records.hpp"

namespace {

using namespace meridian;

template <class Decode>
void round_trip(std::string_view bytes, Decode decode) {
  const auto record = decode(bytes);
  const std::string once = encode(record);
  std::string twice;
  try {
    twice = encode(decode(once));
  } catch (const Error& e) {
    throw meridian::fuzz::Finding(std::string("a record's own encoding does not decode: ") + e.what());
  }
  MERIDIAN_FUZZ_EXPECT(once == twice, "a record re-encoded differently after a round trip");
}

}  // namespace

int meridian_fuzz_records(const std::uint8_t* data, std::size_t size) {
  using namespace meridian;
  using meridian::fuzz::Input;
  meridian::fuzz::Input in(data, size);
  const auto which = in.take<std::uint8_t>();
  const std::string_view bytes = in.rest_text();
  try {
    switch (which % 7) {
      case 0: round_trip(bytes, decode_member); break;
      case 1: round_trip(bytes, decode_announcement); break;
      case 2: round_trip(bytes, decode_commit); break;
      case 3: round_trip(bytes, decode_dispute); break;
      case 4: round_trip(bytes, decode_delta_request); break;
      case 5: round_trip(bytes, decode_state_request); break;
      case 6:
        round_trip(bytes, decode_vouch);
        break;
    }
  } catch (const Error&) {
  }
  // A key read back from etcd names the version it holds, if it is one commit() writes.
  const RoundKeys keys("fuzz");
  if (const auto v = keys.version_of_commit(keys.commits() + std::string(bytes.substr(0, 32))))
    MERIDIAN_FUZZ_EXPECT(*v >= 0 && keys.version_of_commit(keys.commit(*v)) == v);
  return 0;
}

MERIDIAN_FUZZ_TARGET(records)
