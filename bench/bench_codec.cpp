// Delta codec throughput at n = 16M floats (a 64 MB delta): encode, decode and encode+decode in
// GB/s of fp32 input, against a memcpy of the same buffer measured in the same run, interleaved
// with the codec runs so both medians see the same machine. Usage: bench_codec [repeats]
// "enc+hash": encode, then the chunk hashes (4 MiB chunks, two threads) that a site takes of its
// delta right after encoding it and hands the link with it (CrossSite::submit), so that the
// transfer does not read the delta again: what that moves out of the transfer and into the encoder.
// "enc+digest": encode, then the SHA-256 of the encoded bytes that names the delta in its
// announcement and commit (core/util/digest.hpp), one thread: the cost of a delta's identity.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/stats.hpp"
#include "core/util/digest.hpp"
#include "core/util/rng.hpp"
#include "crosssite/codec/codec.hpp"
#include "crosssite/codec/delta_digest.hpp"
#include "transport/chunking/chunker.hpp"

using namespace meridian;
using bench::Clock;
using bench::median;
using bench::seconds_since;

namespace {


template <class F>
double seconds(F&& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 7;
  const std::size_t n = std::size_t{1} << 24;
  const double gb = 4.0 * n / 1e9;
  // Deltas look like small Gaussian noise; a few outliers exercise the per-block scales.
  Rng rng(42);
  std::vector<float> x(n), y(n), copy(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(1e-3 * rng.normal());
  for (std::size_t i = 0; i < n; i += 4099) x[i] *= 100.0f;

  std::printf("n = %zu floats (%.0f MB), %d OpenMP threads, median of %d repeats, block 256 (sparse: 512)\n", n, gb * 1e3,
              omp_get_max_threads(), repeats);
  std::printf("%-5s %10s %10s %12s %12s %10s %8s %14s %10s %16s %12s %14s\n", "codec", "bytes/val", "enc GB/s",
              "dec GB/s", "enc+dec GB/s", "memcpy", "ratio", "enc+hash GB/s", "hash/enc", "enc+digest GB/s",
              "digest/enc", "digest/sha256");
  for (CodecKind kind : {CodecKind::Fp32, CodecKind::Bf16, CodecKind::Int8, CodecKind::Int4, CodecKind::Sparse}) {
    // Sparse as a job derives it: blocks of 512, as many entries as fit 0.1 byte a value.
    const CodecOptions options = kind == CodecKind::Sparse ? CodecOptions{kind, 512, sparse_keep_within(512, 0.1)}
                                                           : CodecOptions{kind, 256};
    std::vector<std::byte> bytes(encoded_size(n, options));
    encode(x, options, bytes);  // warm: page faults and the thread pool
    decode(bytes, y);
    std::memcpy(copy.data(), x.data(), 4 * n);
    std::vector<double> enc, dec, both, mem, hashed, digested, digest_alone, plain;
    for (int r = 0; r < repeats; ++r) {
      mem.push_back(seconds([&] { std::memcpy(copy.data(), x.data(), 4 * n); }));
      const double e = seconds([&] { encode(x, options, bytes); });
      const double h = seconds([&] { chunk_hashes(bytes, kDefaultChunkBytes); });
      const double g = seconds([&] { delta_digest(std::span<const std::byte>(bytes)); });
      digest_alone.push_back(g);
      plain.push_back(seconds([&] { sha256(bytes); }));  // one hash of the whole, on one core
      const double d = seconds([&] { decode(bytes, y); });
      enc.push_back(e), dec.push_back(d), both.push_back(e + d), hashed.push_back(e + h), digested.push_back(e + g);
    }
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, static_cast<double>(std::fabs(x[i] - y[i])));
    const double both_gbs = gb / median(both), mem_gbs = gb / median(mem);
    const auto over_enc = [&](const std::vector<double>& t) { return 100.0 * (median(t) - median(enc)) / median(enc); };
    std::printf(
        "%-5s %10.3f %10.2f %12.2f %12.2f %10.2f %7.0f%% %14.2f %9.0f%% %16.2f %11.0f%% %14.2f   (max |err| %.2e)\n",
        std::string(to_string(kind)).c_str(), static_cast<double>(bytes.size()) / n, gb / median(enc), gb / median(dec),
        both_gbs, mem_gbs, 100.0 * both_gbs / mem_gbs, gb / median(hashed), over_enc(hashed), gb / median(digested),
        over_enc(digested), median(digest_alone) / median(plain), worst);
  }
  return 0;
}
