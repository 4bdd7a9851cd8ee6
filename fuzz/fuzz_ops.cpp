// The ops protocol (sites/site/ops_protocol.hpp): a request as the agent's ops socket receives it
// from meridianctl (or anyone who reaches 127.0.0.1). Parsing is total by its contract, so any
// exception at all is a finding, meridian::Error included. A request that parses must come back
// the same through to_json (what meridianctl sends): parse(to_json(r)) gives to_json(r) again.
#include "fuzz/fuzz_common.hpp"
#include "sites/site/ops_protocol.hpp"

int meridian_fuzz_ops(const std::uint8_t* data, std::size_t size) {
  using namespace meridian;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = parse_ops_request(text);
  if (const auto* why = std::get_if<std::string>(&parsed)) {
    MERIDIAN_FUZZ_EXPECT(!why->empty(), "a refusal without a reason");
    return 0;
  }
  const OpsRequest& r = std::get<OpsRequest>(parsed);
  (void)changes_state(r.command);
  (void)token_matches("fuzz-token", r.token);
  const std::string sent = to_json(r).dump();
  const auto again = parse_ops_request(sent);
  if (const auto* why = std::get_if<std::string>(&again))
    throw meridian::fuzz::Finding("a parsed request, sent again as " + sent + ", is refused: " + *why);
  MERIDIAN_FUZZ_EXPECT(to_json(std::get<OpsRequest>(again)).dump() == sent, "a request changed on its way: ", sent);
  return 0;
}

MERIDIAN_FUZZ_TARGET(ops)
