#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/util/constant_time.hpp"
#include "core/util/digest.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"
#include "core/util/rng.hpp"

using namespace meridian;

TEST_CASE("MERIDIAN_CHECK reports the expression and the operands") {
  const int a = 3, b = 4;
  try {
    MERIDIAN_CHECK(a == b, "a=", a, " b=", b);
    FAIL("check did not throw");
  } catch (const InvariantError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("a == b") != std::string::npos);
    CHECK(msg.find("a=3 b=4") != std::string::npos);
  }
  CHECK_NOTHROW(MERIDIAN_CHECK(a < b));
}

TEST_CASE("exit codes: the input's own faults are permanent and say their kind, the rest may be retried") {
  using meridian::ErrorKind;
  for (const auto kind : {ErrorKind::Usage, ErrorKind::Config, ErrorKind::Data, ErrorKind::Checkpoint}) {
    INFO(meridian::to_string(kind));
    CHECK(meridian::permanent_failure(meridian::exit_code(kind)) == kind);
  }
  CHECK(meridian::exit_code(ErrorKind::Data) == 65);
  CHECK(meridian::exit_code(ErrorKind::Config) == 78);
  for (const auto kind : {ErrorKind::Io, ErrorKind::Peer, ErrorKind::Timeout}) CHECK(meridian::exit_code(kind) == 1);
  for (int code : {0, 1, 9, 137, meridian::kBugExitCode}) CHECK_FALSE(meridian::permanent_failure(code));
}

TEST_CASE("streaming hash equals one-shot hash, any flipped bit changes it") {
  std::string data(1000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  Hasher64 h;
  h.update(data.data(), 300);
  h.update(data.data() + 300, 700);
  CHECK(h.digest() == hash64(data.data(), data.size()));
  const auto base = hash64(data.data(), data.size());
  data[517] ^= 0x10;
  CHECK(hash64(data.data(), data.size()) != base);
}

TEST_CASE("sha256 gives FIPS 180-2's test vectors, and any flipped bit changes it") {
  const auto of = [](const std::string& text) { return sha256(std::as_bytes(std::span(text.data(), text.size()))); };
  const auto hex = [](const Digest& d) {
    std::string out;
    for (const std::byte b : d) out += "0123456789abcdef"[std::to_integer<int>(b) >> 4], out += "0123456789abcdef"[std::to_integer<int>(b) & 15];
    return out;
  };
  CHECK(hex(of("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex(of("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(short_hex(of("abc")) == "ba7816bf8f01");
  std::string text(1000, 'x');
  const Digest before = of(text);
  text[517] ^= 4;
  CHECK(of(text) != before);
}

TEST_CASE("hmac_sha256 gives RFC 4231's test vectors, and another key or message changes it") {
  const auto bytes = [](const std::string& text) {
    return std::vector<std::byte>(std::as_bytes(std::span(text)).begin(), std::as_bytes(std::span(text)).end());
  };
  const auto hex = [](const Digest& d) {
    std::string out;
    for (const std::byte b : d)
      out += "0123456789abcdef"[std::to_integer<int>(b) >> 4], out += "0123456789abcdef"[std::to_integer<int>(b) & 15];
    return out;
  };
  const auto message = bytes("what do ya want for nothing?");
  CHECK(hex(hmac_sha256(bytes("Jefe"), message)) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const std::vector<std::byte> key(20, std::byte{0x0b});
  CHECK(hex(hmac_sha256(key, bytes("Hi There"))) == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hmac_sha256(bytes("Jefe!"), message) != hmac_sha256(bytes("Jefe"), message));
  CHECK(hmac_sha256(bytes("Jefe"), bytes("what do ya want for nothing!")) != hmac_sha256(bytes("Jefe"), message));
}

TEST_CASE("a secret is compared in constant time: equal only when every byte and the length agree") {
  CHECK(equal_in_constant_time("s3cret", "s3cret"));
  CHECK_FALSE(equal_in_constant_time("s3cret", "s3creT"));
  CHECK_FALSE(equal_in_constant_time("s3cret", "s3cre"));
  CHECK_FALSE(equal_in_constant_time("s3cret", "s3cret!"));
  CHECK_FALSE(equal_in_constant_time("s3cret", ""));
  CHECK(equal_in_constant_time("", ""));
}

TEST_CASE("Rng is reproducible from its state and derived streams differ") {
  Rng a(42);
  for (int i = 0; i < 10; ++i) a.next_u64();
  Rng b(0);
  b.set_state(a.state());
  CHECK(a.next_u64() == b.next_u64());
  CHECK(Rng::derive(42, 0).next_u64() != Rng::derive(42, 1).next_u64());
  // Known first value of SplitMix64 from seed 0 (reference implementation by Vigna).
  CHECK(Rng(0).next_u64() == 0xE220A8397B1DCDAFULL);
}

TEST_CASE("Rng normal has mean ~0 and variance ~1, below() stays in range") {
  Rng r(7);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = r.normal();
    sum += x;
    sq += x * x;
  }
  CHECK(std::abs(sum / n) < 0.01);
  CHECK(std::abs(sq / n - 1.0) < 0.02);
  for (int i = 0; i < 1000; ++i) CHECK(r.below(7) < 7);
}
