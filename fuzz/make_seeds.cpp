// Writes the seed inputs of the binary fuzz targets into fuzz/corpus/<name>/ (seed-*), made with
// the project's own encoders so that they are what a peer really sends. Run once by hand after a
// format changes (`cmake --build --preset release --target fuzz_make_seeds &&
// build/release/fuzz/fuzz_make_seeds fuzz/corpus`); the text seeds (ops, config, tokenizer files,
// config.json) and the hand-made safetensors files are kept files.
#include <capnp/message.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/hf/hf_export.hpp"
#include "core/model/param_layout.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/outer/outer_parts.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "crosssite/round/records.hpp"
#include "transport/chunking/chunker.hpp"
#include "transport/link/stripes.hpp"
#include "transport/schemas/store.capnp.h"
#include "transport/schemas/wire_bytes.hpp"

namespace fs = std::filesystem;
using namespace meridian;

namespace {

fs::path root;
int written = 0;

void seed(const std::string& target, const std::string& name, const std::vector<std::byte>& bytes) {
  fs::create_directories(root / target);
  std::ofstream out(root / target / ("seed-" + name), std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ++written;
}

std::vector<std::byte> bytes_of(std::string_view s) {
  const auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

// Builds an input byte by byte, as fuzz_common.hpp's Input reads it.
struct Script {
  std::vector<std::byte> out;
  template <class T>
  Script& put(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
    return *this;
  }
  Script& raw(std::span<const std::byte> b) {
    out.insert(out.end(), b.begin(), b.end());
    return *this;
  }
  Script& piece(std::span<const std::byte> b) {
    put(static_cast<std::uint16_t>(b.size()));
    return raw(b);
  }
};

std::vector<std::byte> with_selector(std::uint8_t first, std::span<const std::byte> rest) {
  return Script{}.put(first).raw(rest).out;
}

Digest digest_of(int k) {
  Digest d{};
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::byte>(i * 7 + static_cast<std::size_t>(k));
  return d;
}

void records() {
  seed("records", "member", with_selector(0, bytes_of(encode(MemberRecord{"us-east", "tcp://10.0.0.1:7100", 3, false}))));
  seed("records", "member-paused",
       with_selector(0, bytes_of(encode(MemberRecord{"eu-west", "tcp://10.77.0.2:7100;curve=abc", 0, true}))));
  seed("records", "member-lanes",
       with_selector(0, bytes_of(encode(MemberRecord{"us-east", "tcp://10.0.0.1:7100", 5, false, -1,
                                                     {"tcp://10.0.0.2:7101", "tcp://10.0.0.3:7102"}}))));
  seed("records", "announcement",
       with_selector(1, bytes_of(encode(DeltaAnnouncement{"us-east", 12, 11, 4096, 1 << 20, digest_of(1), false, 0, 1, false}))));
  seed("records", "announcement-final",
       with_selector(1, bytes_of(encode(DeltaAnnouncement{"ap", 40, 38, 10, 77, digest_of(2), true, 3, 2, true}))));
  CommitRecord c;
  c.number = 13;
  c.entries = {{"us-east", 12, 11, 4096.0, digest_of(1), 0}, {"eu-west", 12, 10, 2048.5, digest_of(3), 1}};
  c.params_hash = 0x1234567890abcdefULL;
  c.proposer = "us-east";
  c.merged = {{"us-east", 12}, {"eu-west", 12}, {"ap", 9}};
  c.fragment = 1;
  c.round_tokens = 8192;
  seed("records", "commit", with_selector(2, bytes_of(encode(c))));
  seed("records", "commit-empty", with_selector(2, bytes_of(encode(CommitRecord{}))));
  seed("records", "dispute", with_selector(3, bytes_of(encode(DeltaDispute{"ap", 7, "us-east", digest_of(4), digest_of(5)}))));
  seed("records", "delta-request", with_selector(4, bytes_of(encode(DeltaRequest{"eu-west", 99}))));
  seed("records", "state-request", with_selector(5, bytes_of(encode(StateRequest{42}))));
}

void chunks() {
  std::vector<std::byte> payload(700);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 31 + 7);
  // A genuine transfer of 700 bytes in chunks of 200, every frame in order through add().
  Script whole;
  whole.put<std::uint8_t>(2).put<std::uint8_t>(1).put<std::uint16_t>(5).put<std::uint8_t>(199).piece(payload).put<std::uint8_t>(8);
  for (std::uint8_t i = 0; i < 4; ++i) whole.put(i).put<std::uint8_t>(0);
  for (std::uint8_t i = 0; i < 4; ++i) whole.put(i).put<std::uint8_t>(0);  // duplicates
  seed("chunks", "genuine-in-order", whole.out);
  // The same, out of order and through every path (payload ahead, claimed places).
  Script mixed;
  mixed.put<std::uint8_t>(2).put<std::uint8_t>(2).put<std::uint16_t>(9).put<std::uint8_t>(99).piece(payload).put<std::uint8_t>(12);
  const std::uint8_t order[] = {6, 0, 3, 1, 5, 2, 4, 6, 0, 1, 2, 3};
  for (std::size_t i = 0; i < 12; ++i) mixed.put(order[i]).put(static_cast<std::uint8_t>(i % 4));
  seed("chunks", "genuine-mixed", mixed.out);
  // Raw frames: a valid header with its payload, then its header alone (confirm).
  const auto frames = make_frames(3, 1, std::span(payload).first(100), 64, false);
  Script raw;
  for (const auto& f : frames) raw.put<std::uint8_t>(0).piece(f.header).piece(f.payload).put<std::uint8_t>(0);
  raw.put<std::uint8_t>(0).piece(frames[0].header).piece({}).put<std::uint8_t>(1);
  seed("chunks", "raw-frames", raw.out);
  // Forged frames: a claim held and landed later, a payload sent ahead of its header.
  Script forged;
  const auto field = [&](std::uint8_t how, std::uint8_t id, std::uint8_t index, std::uint8_t count, std::uint16_t total,
                         std::uint16_t offset, std::uint16_t length) {
    forged.put(how).put(id).put<std::uint8_t>(7).put(index).put(count).put(total).put(offset).put(length);
    forged.put<std::uint64_t>(0).put<std::uint64_t>(0xfeed);
    forged.put<std::uint16_t>(length);
    for (int i = 0; i < length; ++i) forged.put(static_cast<std::uint8_t>(i));
  };
  field(0x01 | 0x10 | (0 << 5), 1, 0, 2, 20, 0, 10);            // a frame
  field(0x01 | 0x10 | (3 << 5), 1, 1, 2, 20, 10, 10);            // a place claimed for the other half...
  forged.put<std::uint16_t>(10).put<std::uint8_t>(0);            // ... held
  std::vector<std::byte> half(10);
  for (int i = 0; i < 10; ++i) half[i] = static_cast<std::byte>(i);
  forged.put<std::uint8_t>(0x03 | 0x10).piece(half);  // then landed
  field(0x05 | 0x10 | (5 << 5), 2, 0, 1, 5, 0, 5);               // a payload ahead, then its header
  field(0x09 | (1 << 5), 3, 0, 3, 9, 0, 3);                      // a placement with a wrong hash
  seed("chunks", "forged", forged.out);
}

std::vector<std::byte> store_request(std::uint64_t id, const std::string& key, const std::string& secret, int kind,
                                     std::int64_t arg = 0, std::string_view value = {}) {
  capnp::MallocMessageBuilder message;
  auto r = message.initRoot<wire::StoreRequest>();
  r.setVersion(wire::STORE_SCHEMA_VERSION);
  r.setId(id);
  r.setKey(capnp::Text::Reader(key.data(), key.size()));
  r.setSecret(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(secret.data()), secret.size()));
  switch (kind) {
    case 0: r.setSet(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(value.data()), value.size())); break;
    case 1: r.setGet(static_cast<std::uint32_t>(arg)); break;
    case 2: r.setCheck(); break;
    case 3: r.setAdd(arg); break;
  }
  return message_bytes(message);
}

void store() {
  const std::string secret = "fuzz-store-secret";
  Script s;
  s.put<std::uint8_t>(0).piece(store_request(1, "rank/0", secret, 1, 50));                   // parked get
  s.put<std::uint8_t>(0).piece(store_request(2, "rank/0", secret, 0, 0, "tcp://h:1"));       // set wakes it
  s.put<std::uint8_t>(0).piece(store_request(3, "gen", secret, 3, 5));                       // add
  s.put<std::uint8_t>(0).piece(store_request(4, "gen", secret, 3, -2));
  s.put<std::uint8_t>(0).piece(store_request(5, "gen", secret, 2));                          // check
  s.put<std::uint8_t>(0).piece(store_request(6, "rank/0", secret, 3, 1));                    // add on a non-counter
  s.put<std::uint8_t>(0).piece(store_request(7, "ops/cmds", "wrong", 0, 0, "x"));            // refused
  s.put<std::uint8_t>(0x40).piece(store_request(8, "missing", secret, 1, 0));                // parked, expires
  s.put<std::uint8_t>(3).put<std::uint8_t>(0);
  seed("store", "session", s.out);
  Script b;  // requests built from fields
  b.put<std::uint8_t>(0x02 | (0 << 4)).put<std::uint64_t>(9).put<std::uint8_t>(1).put<std::uint8_t>('k').piece(bytes_of("v"));
  b.put<std::uint8_t>(0x02 | (3 << 4)).put<std::uint64_t>(10).put<std::uint8_t>(1).put<std::uint8_t>('c').put<std::int64_t>(INT64_MAX);
  b.put<std::uint8_t>(0x02 | (3 << 4)).put<std::uint64_t>(11).put<std::uint8_t>(1).put<std::uint8_t>('c').put<std::int64_t>(1);
  b.put<std::uint8_t>(0x02 | (1 << 4)).put<std::uint64_t>(12).put<std::uint8_t>(1).put<std::uint8_t>('z').put<std::uint8_t>(3);
  b.put<std::uint8_t>(0x01 | (2 << 2)).piece(store_request(13, "two-parts", secret, 2));
  seed("store", "built", b.out);
}

void etcd() {
  const auto answer = [](const char* name, std::uint16_t code, std::string_view body) {
    seed("etcd", name, Script{}.put(code).raw(bytes_of(body)).out);
  };
  answer("range", 0,
         R"({"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"7","raft_term":"2"},)"
         R"("kvs":[{"key":"L21lcmlkaWFuL2RlbW8vbWVtYmVycy9h","create_revision":"5","mod_revision":"7","version":"2","value":"AAAA"}],"count":"1"})");
  answer("txn", 0, R"({"header":{"revision":"8"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"8"}}}]})");
  answer("lease-grant", 0, R"({"header":{"revision":"8"},"ID":"7587873402138214660","TTL":"5"})");
  answer("no-leader", 7, R"({"error":"etcdserver: no leader","code":14,"message":"etcdserver: no leader"})");
  answer("lease-gone", 1, R"({"error":"etcdserver: requested lease not found","code":5})");
  answer("watch", 0, R"({"result":{"header":{"revision":"9"},"created":true}})");
  answer("watch-error", 0, R"({"error":{"grpc_code":14,"http_code":503,"message":"context deadline exceeded"}})");
  answer("proxy-502", 6, "<html><body>Bad Gateway</body></html>");
  answer("base64", 0x8000 + 200, "L21lcmlkaWFuL2RlbW8vY29tbWl0cy8wMDAwMDAwMDAwMDE=");
  answer("keepalive", 0, R"({"result":{"header":{"revision":"9"},"ID":"7587873402138214660","TTL":"5"}})");
  answer("time-to-live", 0, R"({"header":{"revision":"9"},"ID":"7587873402138214660","TTL":"3","grantedTTL":"5"})");
  answer("members", 0,
         R"({"header":{"member_id":"10276657743932975437"},"members":[{"ID":"10276657743932975437","name":"e0",)"
         R"("peerURLs":["http://127.0.0.1:2380"],"clientURLs":["http://127.0.0.1:2379"]},{"ID":"5"}]})");
  answer("status", 0,
         R"({"header":{"member_id":"10276657743932975437","revision":"9"},"version":"3.5.9","dbSize":"20480",)"
         R"("leader":"10276657743932975437","raftTerm":"2"})");
  answer("prefix-state", 0,
         R"({"header":{"revision":"9"},"kvs":[{"key":"L21lcmlkaWFuL2E=","mod_revision":"9"}],"count":"4"})");
  answer("authenticate", 0, R"({"header":{"revision":"9"},"token":"pVb.21"})");
  answer(
      "watch-events", 0,
      R"({"result":{"header":{"revision":"10"},"events":[{"kv":{"key":"L21lcmlkaWFuL2RlbW8vY29tbWl0cy8x",)"
      R"("mod_revision":"10","value":"AA=="}},{"type":"DELETE","kv":{"key":"L21lcmlkaWFuL2RlbW8vbWVtYmVycy9h"}}]}})");
  // A count past int64 as a JSON number once read as a negative count.
  answer("count-past-int64", 0, R"({"header":{"revision":"9"},"count":9223372036854775808})");
}

void checkpoints() {
  const std::vector<float> initial = {0.5f, -1.0f, 2.0f, 0.0f, 1e-3f, -7.0f, 3.5f, 0.25f};
  // A peer's snapshot of version 3 (the fuzz target's state is at 0).
  OuterState state(initial, OuterOptions{}, CodecOptions{CodecKind::Int8, 4, 0}, false);
  for (int v = 1; v <= 3; ++v) state.commit(v, state.preview(std::vector<float>(8, 0.01f * v)));
  seed("checkpoint", "snapshot", with_selector(0, state.snapshot()));
  seed("checkpoint", "snapshot-fixed", with_selector(1, state.snapshot()));
  // A site's checkpoint with two fragments, delayed Nesterov and error feedback (selector 0x0f).
  OuterOptions delayed;
  delayed.delay = 3;
  FragmentPlan plan = {Fragment{{{0, 5}}, {"a"}, 5}, Fragment{{{5, 3}}, {"b"}, 3}};
  OuterState site(initial, delayed, CodecOptions{CodecKind::Int8, 4, 0}, true, plan);
  site.commit(1, site.preview(std::vector<int>{0, 1}, std::vector<float>(8, 0.02f)));
  Checkpoint c;
  c.put_value("step", std::int64_t{120});
  site.save(c);
  seed("checkpoint", "site-fragments", with_selector(0x0f, encode_checkpoint(c)));
  // A part file of a checkpoint in parts, carrying the first state as its slice (a whole one:
  // streaming's fragments are not sharded).
  Checkpoint held, part;
  state.save(held);
  part.put_value("train.step", std::int64_t{120});
  put_outer_slice(part, held);
  seed("checkpoint", "part-slice", with_selector(0x0e, encode_checkpoint(part)));
  Checkpoint small;
  small.put("a", {std::byte{1}, std::byte{2}, std::byte{3}});
  small.put("b", {});
  seed("checkpoint", "two-records", with_selector(1, encode_checkpoint(small)));
}

void tokens() {
  Script shard;
  shard.put<std::uint8_t>(1).put<std::uint8_t>(7);
  shard.put<std::int32_t>(20240520).put<std::int32_t>(1).put<std::int32_t>(64);
  for (int i = 3; i < 256; ++i) shard.put<std::int32_t>(0);
  for (int i = 0; i < 64; ++i) shard.put<std::uint16_t>(static_cast<std::uint16_t>(i * 3));
  seed("tokens", "llmc-shard", shard.out);
  Script wide = shard;
  wide.out[0] = std::byte{3 | 0x30};  // vocabulary 50257, four streams
  seed("tokens", "llmc-shard-streams", wide.out);
  Script shard32;  // llm.c's 32-bit layout (Llama 3's ids)
  shard32.put<std::uint8_t>(3).put<std::uint8_t>(7);
  shard32.put<std::int32_t>(20240801).put<std::int32_t>(7).put<std::int32_t>(64);
  for (int i = 3; i < 256; ++i) shard32.put<std::int32_t>(0);
  for (int i = 0; i < 64; ++i) shard32.put<std::uint32_t>(static_cast<std::uint32_t>(i * 781));
  seed("tokens", "llmc-shard-32", shard32.out);
  seed("tokens", "text", with_selector(0x04, bytes_of("\x05To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer")));
}

void codecs() {
  std::vector<float> x(40);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i) - 0.2f;
  const CodecOptions kinds[] = {{CodecKind::Fp32, 0, 0}, {CodecKind::Bf16, 0, 0}, {CodecKind::Int8, 16, 0},
                                {CodecKind::Int4, 8, 0}, {CodecKind::Sparse, 16, 3}};
  for (const auto& o : kinds) {
    std::vector<std::byte> out(encoded_size(x.size(), o));
    encode(x, o, out);
    seed("codec", std::string(to_string(o.kind)), with_selector(1, out));
  }
  // Most of each block kept: Rice parameter 0, gaps of zero, a short tail block.
  const CodecOptions dense{CodecKind::Sparse, 16, 13};
  std::vector<std::byte> out(encoded_size(x.size(), dense));
  encode(x, dense, out);
  seed("codec", "sparse-dense", with_selector(1, out));
}

// A delta of 40 values in parts of 16, 16 and 8 (blocks of 16 and 8 values), each codec.
void parts() {
  std::vector<float> x(40);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.02f * static_cast<float>(i % 9) - 0.07f;
  const CodecOptions kinds[] = {{CodecKind::Fp32, 0, 0}, {CodecKind::Bf16, 0, 0}, {CodecKind::Int8, 16, 0},
                                {CodecKind::Int4, 8, 0}, {CodecKind::Sparse, 16, 3}};
  for (const auto& o : kinds) {
    Script script;
    script.put<std::uint8_t>(2);
    for (const auto& [offset, count] : {std::pair<std::size_t, std::size_t>{0, 16}, {16, 16}, {32, 8}}) {
      std::vector<std::byte> out(encoded_size(count, o));
      encode(std::span(x).subspan(offset, count), o, out);
      script.piece(out);
    }
    seed("parts", std::string(to_string(o.kind)), script.out);
  }
}

}  // namespace

void stripes() {
  std::vector<std::byte> payload(500);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 13 + 5);
  // A genuine transfer in 3 stripes, fed last first, with a duplicate.
  Script genuine;
  genuine.put<std::uint8_t>(1).put<std::uint16_t>(1).put<std::uint8_t>(2).piece(payload).put<std::uint8_t>(3);
  for (const std::uint8_t i : {2, 1, 1, 0}) genuine.put(i);
  seed("stripes", "genuine", genuine.out);
  // Raw stripes from two peers: a well-formed one, a stripe of another count under the same id, and garbage.
  Script raw;
  raw.put<std::uint8_t>(0).piece(make_stripe(7, 1, payload, 0, 2));
  raw.put<std::uint8_t>(0).piece(make_stripe(7, 1, payload, 1, 3));
  raw.put<std::uint8_t>(2).piece(make_stripe(7, 1, payload, 1, 2));
  raw.put<std::uint8_t>(2).piece(std::vector<std::byte>(40, std::byte{0x5A}));
  seed("stripes", "raw", raw.out);
}

std::vector<std::byte> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return bytes_of(text);
}

// Whole model directories as export_hf writes them, of models small enough for an input: fuzz_hf's
// directory mode (its first byte 2), config.json and the weights, with or without an index.
void hf_dirs() {
  ModelConfig gpt2;
  gpt2.family = ModelFamily::Gpt2;
  gpt2.n_layer = 1, gpt2.n_head = 1, gpt2.d_model = 4, gpt2.context = 4, gpt2.seq_len = 4, gpt2.vocab = 8;
  ModelConfig llama = gpt2;
  llama.family = ModelFamily::Llama;
  llama.n_head = 2, llama.n_kv_head = 1, llama.ffn_hidden = 8, llama.tied = false;
  const fs::path dir = fs::temp_directory_path() / "meridian-make-seeds-hf";
  for (const auto& [name, c, indexed] :
       {std::tuple{"dir-gpt2", gpt2, false}, std::tuple{"dir-llama-indexed", llama, true}}) {
    std::vector<float> params(ParamLayout::of(c).total());
    for (std::size_t i = 0; i < params.size(); ++i) params[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
    fs::remove_all(dir);
    export_hf(c, params, dir);
    const std::string index =
        indexed
            ? std::string(R"({"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001.safetensors"}})")
            : "";
    seed("hf", name,
         Script{}
             .put<std::uint8_t>(2)
             .put<std::uint8_t>(4)
             .piece(file_bytes(dir / "config.json"))
             .piece(bytes_of(index))
             .raw(file_bytes(dir / "model.safetensors"))
             .out);
  }
  fs::remove_all(dir);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <fuzz/corpus directory>\n", argv[0]);
    return 2;
  }
  root = argv[1];
  records();
  chunks();
  store();
  etcd();
  checkpoints();
  tokens();
  codecs();
  stripes();
  parts();
  hf_dirs();
  std::printf("%d seeds written under %s\n", written, root.c_str());
  return 0;
}
