// The site store's server side (intrasite/comm/tcp_store.hpp, StoreRequests): what it makes of the
// frames local processes send it, without a socket. The input is a script of messages from three
// peers: raw frames (any bytes, any number of parts), requests built from fields the input picks
// (right or wrong secret, version, kind, key, value, counter delta), and the passing of time
// (parked gets answered with a timeout).
// Promises checked: every reply is a well-formed StoreResponse of this schema version; every
// request is answered exactly once (at once, or when its key is set or its time is up); nothing
// throws.
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <chrono>
#include <limits>

#include "fuzz/fuzz_common.hpp"
#include "intrasite/comm/tcp_store.hpp"
#include "transport/schemas/store.capnp.h"
#include "transport/schemas/wire_bytes.hpp"

namespace {

using namespace meridian;
using meridian::fuzz::Input;

const std::string kSecret = "fuzz-store-secret";
const std::string kMembers[] = {"replica-0", "replica-1", "ctl"};

void check_reply(std::span<const std::byte> frame) {
  try {
    const auto words = aligned_words(frame, "a reply");
    capnp::FlatArrayMessageReader reader(words);
    const auto r = reader.getRoot<wire::StoreResponse>();
    MERIDIAN_FUZZ_EXPECT(r.getVersion() == wire::STORE_SCHEMA_VERSION);
    switch (r.which()) {
      case wire::StoreResponse::OK:
      case wire::StoreResponse::PRESENT:
      case wire::StoreResponse::COUNTER: break;
      case wire::StoreResponse::VALUE:
        MERIDIAN_FUZZ_EXPECT(r.getValue().size() <= kMaxStoreValueBytes);
        break;
      case wire::StoreResponse::ERROR: (void)r.getError().getMessage(); break;
      default: MERIDIAN_FUZZ_EXPECT(false, "reply kind ", static_cast<int>(r.which()));
    }
  } catch (const kj::Exception& e) {
    throw meridian::fuzz::Finding(std::string("the store server's reply does not decode: ") + e.getDescription().cStr());
  } catch (const Error& e) {
    throw meridian::fuzz::Finding(std::string("the store server's reply does not decode: ") + e.what());
  }
}

std::vector<std::byte> built_request(std::uint8_t how, Input& in) {
  capnp::MallocMessageBuilder message;
  auto r = message.initRoot<wire::StoreRequest>();
  r.setVersion(how & 0x04 ? in.take<std::uint16_t>() : wire::STORE_SCHEMA_VERSION);
  r.setId(in.take<std::uint64_t>());
  const std::string key(meridian::fuzz::as_text(in.bytes(in.take<std::uint8_t>() % 8)));  // NUL-terminated, as Text wants
  r.setKey(capnp::Text::Reader(key.data(), key.size()));
  const auto secret = how & 0x08 ? in.bytes(in.take<std::uint8_t>() % 24) : std::as_bytes(std::span(kSecret));
  r.setSecret(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(secret.data()), secret.size()));
  switch ((how >> 4) % 4) {
    case 0: {
      const auto value = in.piece();
      r.setSet(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(value.data()), value.size()));
      break;
    }
    case 1: r.setGet(in.take<std::uint8_t>()); break;
    case 2: r.setCheck(); break;
    case 3: r.setAdd(in.take<std::int64_t>()); break;
  }
  return message_bytes(message);
}

}  // namespace

int meridian_fuzz_store(const std::uint8_t* data, std::size_t size) {
  using namespace meridian;
  using meridian::fuzz::Input;
  Input in(data, size);
  std::size_t requests_sent = 0, replies = 0;
  StoreRequests store(kSecret, [&](const std::string& peer, std::span<const std::byte> frame) {
    MERIDIAN_FUZZ_EXPECT(!peer.empty());
    check_reply(frame);
    ++replies;
  });
  const auto start = std::chrono::steady_clock::now();
  for (int op = 0; op < 512 && !in.empty(); ++op) {
    const auto how = in.take<std::uint8_t>();
    const std::string& peer = kMembers[(how >> 6) % 3];
    switch (how & 3) {
      case 0: store.receive(peer, in.piece(), 1); break;
      case 1: store.receive(peer, in.piece(), (how >> 2) % 4); break;
      case 2: store.receive(peer, built_request(how, in), 1); break;
      case 3: store.expire(start + std::chrono::milliseconds(in.take<std::uint8_t>())); break;
    }
    if ((how & 3) != 3) ++requests_sent;
  }
  // Every get parked still is due by then: a get waits at most 2^32 - 1 ms (49.7 days).
  store.expire(std::chrono::steady_clock::now() + std::chrono::milliseconds(std::numeric_limits<std::uint32_t>::max()) +
               std::chrono::hours(1));
  MERIDIAN_FUZZ_EXPECT(!store.next_due());
  MERIDIAN_FUZZ_EXPECT(replies == requests_sent, requests_sent, " requests, ", replies, " replies");
  return 0;
}

MERIDIAN_FUZZ_TARGET(store)
