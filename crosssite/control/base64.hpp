#pragma once
// Standard base64 (RFC 4648, with padding): the etcd JSON gateway carries keys and values as
// base64 strings, since they are arbitrary bytes.
#include <optional>
#include <string>
#include <string_view>

namespace meridian {

std::string base64_encode(std::string_view bytes);
// nullopt for anything that is not canonical padded base64, so a bad reply is caught, not guessed at.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace meridian
