// etcd's answers as the client reads them (crosssite/control/etcd_answer.hpp): an HTTP status (the first
// two bytes pick one of those etcd and proxies give, or any number) and a body, classified; an
// answer's reply read by each of the client's calls, and the body read as a line of a watch
// stream (crosssite/control/etcd_reply.hpp); and the base64 that carries every key and value
// (crosssite/control/base64.hpp), which must refuse all but canonical text: what it decodes
// encodes back to the same text, and anything encoded decodes back to itself.
// classify_etcd_answer and watch_line are total, and a reader refuses with Error(Peer): any
// other exception is a finding, as is a reading that breaks the reader's promise.
#include <algorithm>

#include "crosssite/control/base64.hpp"
#include "crosssite/control/etcd_answer.hpp"
#include "crosssite/control/etcd_reply.hpp"
#include "fuzz/fuzz_common.hpp"

namespace {

// `read`, its refusal (Error(Peer)) taken as the answer to bad input.
template <class Read>
void refused_or(Read read) {
  try {
    read();
  } catch (const meridian::Error& e) {
    MERIDIAN_FUZZ_EXPECT(e.kind() == meridian::ErrorKind::Peer, "a reply refused as ", meridian::to_string(e.kind()));
  }
}

// Each of EtcdClient's readers on an answer's reply, with what each promises.
void read_reply(const nlohmann::json& reply) {
  using namespace meridian;
  const std::string prefix = "/meridian/";
  refused_or([&] { (void)etcd_reply::value_of(reply, "/meridian/demo/members/a"); });
  refused_or([&] {
    const auto read = etcd_reply::prefix_read(reply, prefix);
    MERIDIAN_FUZZ_EXPECT(read.revision >= 0, "a revision below zero");
    for (std::size_t i = 0; i < read.kvs.size(); ++i)
      MERIDIAN_FUZZ_EXPECT(
          read.kvs[i].first.starts_with(prefix) && (i == 0 || read.kvs[i - 1].first < read.kvs[i].first),
          "a prefix read out of range or order");
  });
  refused_or([&] {
    const auto state = etcd_reply::prefix_state(reply);
    MERIDIAN_FUZZ_EXPECT(state.count >= 0 && state.newest_revision >= 0, "a count or revision below zero");
  });
  refused_or([&] { (void)etcd_reply::succeeded(reply); });
  refused_or([&] { MERIDIAN_FUZZ_EXPECT(etcd_reply::granted_lease(reply) != 0, "a lease granted without an id"); });
  refused_or([&] { (void)etcd_reply::renewed_ttl(reply); });
  refused_or([&] {
    if (const auto ttl = etcd_reply::time_to_live(reply)) MERIDIAN_FUZZ_EXPECT(ttl->remaining_s >= 0, "a negative TTL");
  });
  refused_or([&] { (void)etcd_reply::members(reply); });
  refused_or([&] { (void)etcd_reply::member_status(reply); });
  refused_or([&] { MERIDIAN_FUZZ_EXPECT(!etcd_reply::auth_token(reply).empty(), "an empty token"); });
}

}  // namespace

int meridian_fuzz_etcd(const std::uint8_t* data, std::size_t size) {
  using namespace meridian;
  meridian::fuzz::Input in(data, size);
  static constexpr int kStatuses[] = {200, 400, 404, 408, 429, 500, 502, 503, 504};
  const auto code = in.take<std::uint16_t>();
  const int status = code < 0x8000 ? kStatuses[code % std::size(kStatuses)] : code - 0x8000;
  const std::string_view body = in.rest_text();

  const EtcdAnswer answer = classify_etcd_answer(status, body);
  if (answer.kind == EtcdAnswer::Kind::Ok) {
    MERIDIAN_FUZZ_EXPECT(status == 200 && answer.reply.is_object(), "status ", status);
    (void)answer.reply.dump();
    read_reply(answer.reply);
  } else {
    MERIDIAN_FUZZ_EXPECT(answer.reply.is_null(), "a failed answer carries a reply");
  }

  // The area "" holds every key: each event counts there.
  static const std::vector<std::string> kAreas = {"/meridian/demo/members/", "/meridian/demo/commits/", ""};
  const auto line = etcd_reply::watch_line(body, kAreas);
  if (line.ok) {
    MERIDIAN_FUZZ_EXPECT(line.area_events.size() == kAreas.size() && line.area_events.back() == line.events &&
                             std::all_of(line.area_events.begin(), line.area_events.end(),
                                         [&](std::uint64_t n) { return n <= line.events; }),
                         "a watch line's events by area do not add up");
  }

  if (const auto bytes = base64_decode(body))
    MERIDIAN_FUZZ_EXPECT(base64_encode(*bytes) == body, "base64 accepted text that is not canonical");
  const std::string encoded = base64_encode(body);
  const auto decoded = base64_decode(encoded);
  MERIDIAN_FUZZ_EXPECT(decoded && *decoded == body, "base64 does not give back what it encoded");
  return 0;
}

MERIDIAN_FUZZ_TARGET(etcd)
