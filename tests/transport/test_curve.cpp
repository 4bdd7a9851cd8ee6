// CURVE on the ZeroMQ link (issue 17): keys and their files, and who gets through to a link that
// speaks it. The Link contract itself runs over CURVE in test_link ("zmq link with CURVE").
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/io/secret_file.hpp"
#include "core/util/error.hpp"
#include "transport/chunking/chunker.hpp"
#include "transport/link/curve.hpp"
#include "transport/link/zmq_link.hpp"

namespace meridian {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("meridian-curve-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST_CASE("curve keys: made fresh, read back from a secret file with the public half derived, refused when open to others") {
  const CurveKeypair a = make_curve_keypair(), b = make_curve_keypair();
  CHECK(is_curve_key(a.public_key));
  CHECK(is_curve_key(a.secret_key));
  CHECK(a.public_key != b.public_key);
  CHECK_FALSE(is_curve_key(a.public_key.substr(1)));
  CHECK_FALSE(is_curve_key(std::string(40, ' ')));  // not Z85

  TempDir dir;
  const fs::path file = dir.path / "link.key";
  write_secret_file(file, a.secret_key + "\n");
  const CurveKeypair read = read_curve_secret_file(file, "[transport] link_key_file");
  CHECK(read.public_key == a.public_key);
  CHECK(read.secret_key == a.secret_key);

  ::chmod(file.c_str(), 0644);
  CHECK_THROWS_WITH_AS(read_curve_secret_file(file, "the key"), doctest::Contains("chmod 600"), Error);
  write_secret_file(file, "not a key");
  CHECK_THROWS_WITH_AS(read_curve_secret_file(file, "the key"), doctest::Contains("holds no CURVE secret key"), Error);
}

TEST_CASE("curve addresses name their key after the endpoint and split back") {
  const CurveKeypair k = make_curve_keypair();
  const std::string address = curve_address("tcp://10.77.0.1:7100", k.public_key);
  const CurveAddress split = split_curve_address(address);
  CHECK(split.endpoint == "tcp://10.77.0.1:7100");
  REQUIRE(split.public_key.has_value());
  CHECK(*split.public_key == k.public_key);
  CHECK_FALSE(split_curve_address("tcp://10.77.0.1:7100").public_key.has_value());
}

// Two sites of a job, a and b, each with its link over CURVE; and one keypair no job lists.
struct Job {
  CurveKeypair a = make_curve_keypair(), b = make_curve_keypair(), outsider = make_curve_keypair();
  std::set<std::string> keys{a.public_key, b.public_key};
  std::unique_ptr<Link> link_a = make_zmq_link("127.0.0.1", kDefaultChunkBytes, {}, 0, kLinkQueueBytes, LinkCurve{a, keys});
  std::unique_ptr<Link> link_b = make_zmq_link("127.0.0.1", kDefaultChunkBytes, {}, 0, kLinkQueueBytes, LinkCurve{b, keys});
};

std::vector<std::byte> bytes(std::size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return out;
}

std::optional<Received> wait_for(Link& rx, std::chrono::milliseconds bound) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < until)
    if (auto r = rx.receive(10ms)) return r;
  return std::nullopt;
}

// A well-formed one-chunk transfer sent from a bare DEALER that claims `routing_id` and, when
// `keys` is given, speaks CURVE with them to `address`'s key.
void send_raw(const std::string& address, const std::string& routing_id, const CurveKeypair* keys,
              const std::vector<std::byte>& payload) {
  const auto frames = make_frames(7, 1, payload, kDefaultChunkBytes);
  zmq::context_t context(1);
  zmq::socket_t s(context, zmq::socket_type::dealer);
  s.set(zmq::sockopt::routing_id, routing_id);
  s.set(zmq::sockopt::linger, 500);  // a refused handshake never delivers: give up after 0.5 s
  const CurveAddress target = split_curve_address(address);
  if (keys != nullptr) {
    s.set(zmq::sockopt::curve_serverkey, *target.public_key);
    s.set(zmq::sockopt::curve_publickey, keys->public_key);
    s.set(zmq::sockopt::curve_secretkey, keys->secret_key);
  }
  s.connect(target.endpoint);
  REQUIRE(s.send(zmq::buffer("D", 1), zmq::send_flags::sndmore));
  REQUIRE(s.send(zmq::buffer(frames[0].header.data(), frames[0].header.size()), zmq::send_flags::sndmore));
  REQUIRE(s.send(zmq::buffer(frames[0].payload.data(), frames[0].payload.size())));
  std::this_thread::sleep_for(300ms);  // the handshake and the message, or their refusal
}

TEST_CASE("curve link: the job's sites exchange, and their addresses name their keys") {
  Job job;
  CHECK(split_curve_address(job.link_a->address()).public_key == job.a.public_key);
  const auto payload = bytes(300'000, 1);
  job.link_a->send(job.link_b->address(), 1, 0, payload);
  const auto got = wait_for(*job.link_b, 5s);
  REQUIRE(got.has_value());
  CHECK(got->peer == job.link_a->address());
  CHECK(got->bytes == payload);
  job.link_b->send(got->peer, 2, 0, payload);  // answered at the address it came from
  const auto back = wait_for(*job.link_a, 5s);
  REQUIRE(back.has_value());
  CHECK(back->bytes == payload);
}

TEST_CASE("curve link: a key the job does not list is refused at the handshake, and named") {
  Job job;
  auto outsider = make_zmq_link("127.0.0.1", kDefaultChunkBytes, {}, 0, kLinkQueueBytes,
                                LinkCurve{job.outsider, {job.outsider.public_key, job.b.public_key}});
  outsider->send(job.link_b->address(), 1, 0, bytes(1000, 2));
  CHECK_FALSE(wait_for(*job.link_b, 500ms).has_value());
  CHECK(job.link_b->counters().frames_received == 0);  // nothing of it came through
  const auto refused = job.link_b->take_refusals();
  REQUIRE_FALSE(refused.empty());
  CHECK(refused.begin()->first == "key " + job.outsider.public_key.substr(0, 8) + " from 127.0.0.1");
}

TEST_CASE("curve link: a plaintext sender gets nothing through") {
  Job job;
  auto plain = make_zmq_link("127.0.0.1");
  send_raw(job.link_b->address(), plain->address(), nullptr, bytes(1000, 3));
  CHECK_FALSE(wait_for(*job.link_b, 300ms).has_value());
  CHECK(job.link_b->counters().frames_received == 0);
}

TEST_CASE("curve link: a site with the job's key cannot speak under another site's address") {
  Job job;
  // a's key, b's address claimed: refused, and named.
  send_raw(job.link_b->address(), job.link_b->address(), &job.a, bytes(1000, 4));
  CHECK_FALSE(wait_for(*job.link_b, 300ms).has_value());
  CHECK(job.link_b->counters().strangers == 1);
  const auto refused = job.link_b->take_refusals();
  REQUIRE(refused.size() == 1);
  CHECK(refused.begin()->first ==
        split_curve_address(job.link_b->address()).endpoint + " (not with its key)");
  // An address naming no key at all, with a's key: refused the same way.
  send_raw(job.link_b->address(), "tcp://127.0.0.1:9", &job.a, bytes(1000, 5));
  CHECK_FALSE(wait_for(*job.link_b, 300ms).has_value());
  CHECK(job.link_b->counters().strangers == 2);
  // Under its own address, a's key is good.
  send_raw(job.link_b->address(), curve_address("tcp://127.0.0.1:9", job.a.public_key), &job.a, bytes(1000, 6));
  const auto got = wait_for(*job.link_b, 2s);
  REQUIRE(got.has_value());
  CHECK(got->bytes == bytes(1000, 6));
}

TEST_CASE("curve link: it sends only to addresses that name a key") {
  Job job;
  CHECK_THROWS_WITH_AS(job.link_a->send("tcp://127.0.0.1:9", 1, 0, bytes(10, 7)),
                       doctest::Contains("names no CURVE key"), Error);
}

}  // namespace
}  // namespace meridian
