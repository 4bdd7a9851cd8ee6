// The delta codecs' decoder (crosssite/codec/codec.hpp): an encoded delta as a peer's link delivers it.
// The output's size is what a site expects (its model's or fragment's): the header's own n when
// it is small, else the first byte's choice, so the size check is passed and failed both.
// Promises checked: a decoded delta is all finite (the header comment's promise, which the
// screens and the mean rely on), and decoding an encoding of it gives a delta of the same size
// back; nothing but Error is thrown.
#include <cmath>

#include "fuzz/fuzz_common.hpp"
#include "crosssite/codec/codec.hpp"

int meridian_fuzz_codec(const std::uint8_t* data, std::size_t size) {
  using namespace meridian;
  meridian::fuzz::Input in(data, size);
  const auto how = in.take<std::uint8_t>();
  const auto bytes = in.rest();
  std::uint64_t n = 0;
  if (bytes.size() >= kCodecHeaderBytes) std::memcpy(&n, bytes.data() + 8, sizeof n);
  const std::size_t expected = (how & 1) && n <= (std::uint64_t{1} << 16) ? n : how >> 1;
  std::vector<float> y(expected);
  try {
    decode(bytes, y);
  } catch (const Error&) {
    return 0;
  }
  for (std::size_t i = 0; i < y.size(); ++i) MERIDIAN_FUZZ_EXPECT(std::isfinite(y[i]), "value ", i, " is ", y[i]);
  // Encoded again (as the same kind when its block suits, else int8), it decodes to as many values.
  CodecOptions options;
  options.kind = static_cast<CodecKind>(std::to_integer<std::uint8_t>(bytes[0]));
  std::memcpy(&options.block, bytes.data() + 4, sizeof(std::uint32_t));
  options.keep = static_cast<int>(std::to_integer<std::uint8_t>(bytes[2]) | std::to_integer<std::uint8_t>(bytes[3]) << 8);
  std::vector<std::byte> out(encoded_size(y.size(), options));
  encode(y, options, out);
  std::vector<float> z(y.size());
  decode(out, z);
  for (std::size_t i = 0; i < z.size(); ++i) MERIDIAN_FUZZ_EXPECT(std::isfinite(z[i]), "value ", i, " is ", z[i]);
  return 0;
}

MERIDIAN_FUZZ_TARGET(codec)
