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

CurveKeypair read_curve_secret_file(const std::filesystem::path& path, const std::string& what) {
  std::string secret = read_secret_file(path, what);
  if (!is_curve_key(secret))
    throw make_error(ErrorKind::Config, what, " file ", path.string(), " holds no CURVE secret key (",
                     kCurveKeyChars, " characters of Z85, as `meridian keys` writes it)");
  std::array<char, kCurveKeyChars + 1> public_key{};
  if (zmq_curve_public(public_key.data(), secret.c_str()) != 0)
    throw make_error(ErrorKind::Config, what, " file ", path.string(), ": ", zmq_strerror(errno));
  return {public_key.data(), std::move(secret)};
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
