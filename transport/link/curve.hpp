#pragma once
// ZeroMQ CURVE (CurveZMQ, RFC 26) for the cross-site links: every site holds a keypair, the job
// lists every site's public key, and a link talks only to holders of listed keys. Keys are Z85
// text, 40 characters for 32 bytes, as ZeroMQ's own tools write them.
//
// A CURVE link's address carries its public key after the endpoint,
//     tcp://10.77.0.1:7100;curve=<40 characters>
// (';' is not in Z85's alphabet), so a peer that learns the address learns the key it must dial
// with, and a receiver can hold the key a sender proved (ZAP's User-Id) against the address it
// claims. The job's list of keys, not the control plane, says which keys are the job's: a member
// record whose address carries another key than its site's is not believed.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace meridian {

struct CurveKeypair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters; kept in a file only its owner can read
};

inline constexpr std::size_t kCurveKeyChars = 40;

// A fresh keypair from the kernel's randomness. Error(Io) when libzmq was built without CURVE.
CurveKeypair make_curve_keypair();
// The keypair whose secret half is `secret_key` (Z85): its public half derived. Error(Config) when
// it is not a key, or libzmq was built without CURVE.
CurveKeypair curve_keypair_of(std::string secret_key);
// Whether `key` is a CURVE key as Z85 writes it: 40 characters that decode.
bool is_curve_key(std::string_view key);
// The keypair whose secret half is in `path` (one line of Z85; mode 0600): the public half is
// derived. Error(Config) naming `what` and the file when it is missing, open to other users, or
// not a key.
CurveKeypair read_curve_secret_file(const std::filesystem::path& path, const std::string& what);

// An address as a CURVE link gives it, and back. split: nullopt key for an address without one.
std::string curve_address(const std::string& endpoint, const std::string& public_key);
struct CurveAddress {
  std::string endpoint;                   // what ZeroMQ connects to
  std::optional<std::string> public_key;  // the key it must prove, when the address names one
};
CurveAddress split_curve_address(const std::string& address);

}  // namespace meridian
