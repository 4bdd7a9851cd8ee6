// etcd's answers as the client reads them (crosssite/control/etcd_answer.hpp): an HTTP status (the first
// two bytes pick one of those etcd and proxies give, or any number) and a body, classified; and
// the base64 that carries every key and value (crosssite/control/base64.hpp), which must refuse all
// but canonical text: what it decodes encodes back to the same text, and anything encoded decodes
// back to itself. classify_etcd_answer is total: any exception is a finding.
#include "fuzz/fuzz_common.hpp"
#include "crosssite/control/base64.hpp"
#include "crosssite/control/etcd_answer.hpp"

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
  } else {
    MERIDIAN_FUZZ_EXPECT(answer.reply.is_null(), "a failed answer carries a reply");
  }

  if (const auto bytes = base64_decode(body))
    MERIDIAN_FUZZ_EXPECT(base64_encode(*bytes) == body, "base64 accepted text that is not canonical");
  const std::string encoded = base64_encode(body);
  const auto decoded = base64_decode(encoded);
  MERIDIAN_FUZZ_EXPECT(decoded && *decoded == body, "base64 does not give back what it encoded");
  return 0;
}

MERIDIAN_FUZZ_TARGET(etcd)
