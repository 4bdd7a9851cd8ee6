#pragma once
// meridianctl's side of the ops socket: one request, one reply, bounded in time.
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

namespace meridian {

// Sends `request` to the agent at `endpoint` and returns its reply; Error(Timeout) when no reply
// comes in time, Error(Peer) when the reply is not a JSON object.
nlohmann::json ops_call(const std::string& endpoint, const nlohmann::json& request, std::chrono::milliseconds timeout);

// The readable form of a status reply: members and their health, progress, last events.
std::string status_table(const nlohmann::json& status);
// The readable form of a wan reply: per peer measured and configured figures, then the faults.
std::string wan_table(const nlohmann::json& wan);

}  // namespace meridian
