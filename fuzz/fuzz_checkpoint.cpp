// Checkpoint files and state snapshots (core/checkpoint, FORMAT.md): the bytes of a checkpoint a
// site reads from its disk or an operator hands it, or of a state snapshot a peer sends
// (OuterState::adopt). The first byte's low bit says whether to make the input's checksums right
// before decoding: every record's XXH3 and the end record's count and chain are recomputed where
// the lengths allow, so that the fuzzer gets past the hashes to what lies behind them (names,
// duplicates, the end record, then what the outer state reads from the records).
// Promises checked: a decoded checkpoint encodes and decodes to the same records; a snapshot or
// checkpoint the outer state takes leaves it in a state it can step from; a part file's slice of a
// sharded state (sliced_records.hpp) joins alone only when it is the whole, and restored as a
// part it leaves a state that encodes and rebases; nothing but Error is thrown.
#include <algorithm>
#include <array>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/sliced_records.hpp"
#include "core/util/hash.hpp"
#include "crosssite/outer/outer_state.hpp"
#include "fuzz/fuzz_common.hpp"

namespace {

using namespace meridian;

std::uint64_t load_le(const std::byte* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t(p[i]) << (8 * i);
  return v;
}
void store_le(std::byte* p, std::uint64_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

// Walks the records as FORMAT.md lays them out and writes the hashes they should have; stops at
// the first record whose lengths do not fit (the decoder is to find that one).
void fix_checksums(std::vector<std::byte>& file) {
  std::size_t at = 16;
  Hasher64 chain;
  std::uint64_t count = 0;
  while (at <= file.size() && file.size() - at >= 16) {
    const std::uint64_t name_len = load_le(&file[at + 4], 4);
    const std::uint64_t payload_len = load_le(&file[at + 8], 8);
    const std::uint64_t left = file.size() - at - 16;
    if (name_len > left || payload_len > left - name_len) return;
    const std::uint64_t pad = (8 - (name_len + payload_len) % 8) % 8;
    if (name_len + payload_len + pad + 8 > left) return;
    const std::string_view name(reinterpret_cast<const char*>(&file[at + 16]), name_len);
    const std::size_t hash_at = at + 16 + name_len + payload_len + pad;
    if (name == Checkpoint::kEndRecordName && payload_len == 16) {
      store_le(&file[at + 16 + name_len], count, 8);
      store_le(&file[at + 16 + name_len + 8], chain.digest(), 8);
    }
    const std::uint64_t hash = hash64(&file[at], hash_at - at);
    store_le(&file[hash_at], hash, 8);
    std::array<std::byte, 8> bytes{};
    store_le(bytes.data(), hash, 8);
    chain.update(bytes.data(), bytes.size());
    ++count;
    at = hash_at + 8;
  }
}

// An outer state of 8 weights, as its first byte's bits make it: with 2 fragments or 1, with
// delayed Nesterov or not, with error feedback or not.
OuterState outer_state(std::uint8_t how) {
  const std::vector<float> initial = {0.5f, -1.0f, 2.0f, 0.0f, 1e-3f, -7.0f, 3.5f, 0.25f};
  OuterOptions outer;
  if (how & 2) outer.delay = 3;
  FragmentPlan plan;
  if (how & 4) plan = {Fragment{{{0, 5}}, {"a"}, 5}, Fragment{{{5, 3}}, {"b"}, 3}};
  return OuterState(initial, outer, CodecOptions{CodecKind::Int8, 4, 0}, (how & 8) != 0, plan);
}

// A state that took bytes from outside must still step: one commit of a small mean on every fragment.
void step(OuterState& state) {
  std::vector<int> fragments;
  for (int f = 0; f < state.fragments(); ++f) fragments.push_back(f);
  const std::vector<float> means(state.size(), 0.01f);
  auto outcome = state.preview(fragments, means);
  state.commit(state.version() + 1, std::move(outcome));
  std::vector<float> local(state.global().begin(), state.global().end());
  (void)state.encode_delta(local, 0);
}

}  // namespace

int meridian_fuzz_checkpoint(const std::uint8_t* data, std::size_t size) {
  using namespace meridian;
  using meridian::fuzz::Input;
  meridian::fuzz::Input in(data, size);
  const auto how = in.take<std::uint8_t>();
  const auto rest = in.rest();
  std::vector<std::byte> file(rest.begin(), rest.end());
  if (how & 1) fix_checksums(file);

  Checkpoint checkpoint;
  try {
    checkpoint = decode_checkpoint(file, "fuzz input");
  } catch (const Error&) {
    return 0;
  }
  // What it decoded encodes to a file that decodes to the same records.
  const auto encoded = encode_checkpoint(checkpoint);
  Checkpoint again;
  try {
    again = decode_checkpoint(encoded, "re-encoded fuzz input");
  } catch (const Error& e) {
    throw meridian::fuzz::Finding(std::string("a decoded checkpoint, encoded again, does not decode: ") + e.what());
  }
  MERIDIAN_FUZZ_EXPECT(again.names() == checkpoint.names());
  for (const auto& name : checkpoint.names()) {
    const auto a = checkpoint.get(name), b = again.get(name);
    MERIDIAN_FUZZ_EXPECT(std::equal(a.begin(), a.end(), b.begin(), b.end()), "record ", name);
  }

  // As a peer's state snapshot: taken when it is newer and hashes as its commit says.
  try {
    OuterState state = outer_state(how);
    std::vector<float> local(state.global().begin(), state.global().end());
    const std::uint64_t expected = checkpoint.has("outer.global")
                                       ? OuterState::weights_hash(checkpoint.get_pod<float>("outer.global"))
                                       : 0;
    state.adopt(file, expected, local);
    step(state);
  } catch (const Error&) {
  }
  // As a part file of a checkpoint in parts: its slice of a sharded state, joined alone, is whole
  // only when it covers the state.
  bool joined_alone = false;
  std::optional<StoredSlice> stored;
  try {
    stored = stored_slice(checkpoint, "fuzz part");
    if (stored) {
      Checkpoint joined;
      join_slices(std::span(&stored->slice, 1), stored->kinds(), ErrorKind::Checkpoint, joined);
      joined_alone = true;
    }
  } catch (const Error&) {
  }
  MERIDIAN_FUZZ_EXPECT(!joined_alone || (stored->slice.offset == 0 && stored->slice.count == stored->slice.total));
  // As the part of a sharded outer state a resuming replica reads from the part files
  // (OuterState::restore_part): taken or refused, and a state taken encodes and rebases its part.
  try {
    OuterState state = outer_state(static_cast<std::uint8_t>(how & ~4));  // a sharded state has one fragment
    if (stored && stored->slice.total == state.size() && stored->slice.count > 0) {
      state.restore_part(checkpoint, {stored->slice.offset, stored->slice.count});
      std::vector<float> local(state.size(), 0.125f);
      (void)state.encode_delta(local, 0);
      state.rebase(local);
    }
  } catch (const Error&) {
  }
  // As the outer part of a site's own checkpoint.
  try {
    OuterState state = outer_state(how);
    state.restore(checkpoint);
    step(state);
  } catch (const Error&) {
  }
  return 0;
}

MERIDIAN_FUZZ_TARGET(checkpoint)
