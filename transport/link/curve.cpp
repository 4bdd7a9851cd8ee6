#include "transport/link/curve.hpp"

#include <zmq.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "core/io/secret_file.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

constexpr std::string_view kKeyMark = ";curve=";

}  // namespace

CurveKeypair make_curve_keypair() {
  std::array<char, kCurveKeyChars + 1> public_key{}, secret_key{};
  if (zmq_curve_keypair(public_key.data(), secret_key.data()) != 0)
    throw make_error(ErrorKind::Io, "cannot make a CURVE keypair: ", zmq_strerror(errno));
  return {public_key.data(), secret_key.data()};
}

bool is_curve_key(std::string_view key) {
  if (key.size() != kCurveKeyChars) return false;
  const std::string text(key);
  std::array<std::uint8_t, 32> bytes{};
  return zmq_z85_decode(bytes.data(), text.c_str()) != nullptr;
}

CurveKeypair curve_keypair_of(std::string secret_key) {
  if (!is_curve_key(secret_key))
    throw make_error(ErrorKind::Config, "not a CURVE secret key (", kCurveKeyChars, " characters of Z85)");
  std::array<char, kCurveKeyChars + 1> public_key{};
  if (zmq_curve_public(public_key.data(), secret_key.c_str()) != 0)
    throw make_error(ErrorKind::Config, "no public key for a CURVE secret key: ", zmq_strerror(errno));
  return {public_key.data(), std::move(secret_key)};
}

CurveKeypair read_curve_secret_file(const std::filesystem::path& path, const std::string& what) {
  std::string secret = read_secret_file(path, what);
  if (!is_curve_key(secret))
    throw make_error(ErrorKind::Config, what, " file ", path.string(), " holds no CURVE secret key (",
                     kCurveKeyChars, " characters of Z85, as `meridian keys` writes it)");
  try {
    return curve_keypair_of(std::move(secret));
  } catch (const Error& e) {
    throw make_error(ErrorKind::Config, what, " file ", path.string(), ": ", e.what());
  }
}

std::string curve_address(const std::string& endpoint, const std::string& public_key) {
  MERIDIAN_CHECK(is_curve_key(public_key), "not a CURVE key: \"", public_key, "\"");
  return endpoint + std::string(kKeyMark) + public_key;
}

CurveAddress split_curve_address(const std::string& address) {
  const auto mark = address.rfind(kKeyMark);
  if (mark == std::string::npos) return {address, std::nullopt};
  return {address.substr(0, mark), address.substr(mark + kKeyMark.size())};
}

}  // namespace meridian
