#include "intrasite/group/protocol.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

#include "core/util/error.hpp"
#include "transport/schemas/site.capnp.h"
#include "transport/schemas/wire_bytes.hpp"

namespace meridian {

std::vector<std::byte> encode_generation(const Generation& g) {
  capnp::MallocMessageBuilder message;
  auto rec = message.initRoot<wire::GenerationRecord>();
  rec.setVersion(wire::SITE_SCHEMA_VERSION);
  rec.setNumber(g.number);
  auto members = rec.initMembers(static_cast<unsigned>(g.members.size()));
  for (unsigned i = 0; i < g.members.size(); ++i) members.set(i, g.members[i]);
  return message_bytes(message);
}

Generation decode_generation(std::span<const std::byte> bytes) {
  const auto words = aligned_words(bytes, "a generation record");
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 1 << 16;
    capnp::FlatArrayMessageReader reader(words, options);
    const auto rec = reader.getRoot<wire::GenerationRecord>();
    if (rec.getVersion() != wire::SITE_SCHEMA_VERSION)
      throw make_error(ErrorKind::Peer, "generation record has schema version ", rec.getVersion(), ", expected ",
                       wire::SITE_SCHEMA_VERSION);
    Generation g;
    g.number = rec.getNumber();
    for (auto m : rec.getMembers()) g.members.push_back(m);
    return g;
  } catch (const kj::Exception& e) {
    throw make_error(ErrorKind::Peer, "malformed generation record: ", e.getDescription().cStr());
  }
}

}  // namespace meridian
