// Token data (core/data): a file as `meridian` loads its [data] path, from a file under /dev/shm;
// the first byte picks the format (text, or an llm.c .bin shard), the vocabulary, the validation
// split and the sampling (seq_len, group members) the tokens then go through, as a site's replicas do.
// Promises checked: a shard's tokens are the 16- or 32-bit ids after its header; the split keeps every token;
// every sampled window lies within the tokens; nothing but Error(Data/Config) is thrown.
#include <algorithm>

#include "core/data/corpus.hpp"
#include "core/data/sampler.hpp"
#include "core/data/tokens.hpp"
#include "fuzz/fuzz_common.hpp"

int meridian_fuzz_tokens(const std::uint8_t* data, std::size_t size) {
  using namespace meridian;
  meridian::fuzz::Input in(data, size);
  const auto how = in.take<std::uint8_t>();
  const auto seq = in.take<std::uint8_t>();
  const auto file_bytes = in.rest();
  const DataFormat format = how & 1 ? DataFormat::LlmcBin : DataFormat::Text;
  const int vocab = how & 2 ? 50257 : 256;
  const double val_fraction = ((how >> 2) & 3) * 0.25;  // 0, 0.25, 0.5, 0.75
  const int n_members = 1 + ((how >> 4) & 3);
  const int seq_len = 1 + seq % 64;
  try {
    const meridian::fuzz::TempFile file(how & 1 ? "train.bin" : "train.txt", file_bytes);
    auto tokens = load_tokens(file.path(), format);
    if (format == DataFormat::LlmcBin) {  // 16-bit or 32-bit little-endian ids after the header
      const std::size_t width = (file_bytes.size() - 1024) / tokens.size();
      MERIDIAN_FUZZ_EXPECT((width == 2 || width == 4) && file_bytes.size() == 1024 + width * tokens.size());
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        std::uint32_t id = 0;
        for (std::size_t b = 0; b < width; ++b)
          id |= std::uint32_t{static_cast<std::uint8_t>(file_bytes[1024 + i * width + b])} << (8 * b);
        MERIDIAN_FUZZ_EXPECT(id == static_cast<std::uint32_t>(tokens[i]));
      }
    } else {
      MERIDIAN_FUZZ_EXPECT(tokens.size() == file_bytes.size());
    }
    check_vocab(tokens, vocab, file.path());
    Corpus corpus = Corpus::open({{file.path(), 1}}, format, vocab);
    const std::size_t n = tokens.size();
    const Corpus val = corpus.hold_out(val_fraction);
    MERIDIAN_FUZZ_EXPECT(corpus.tokens() + val.tokens() == n);
    (void)eval_window_count(val.read_front(0).size(), seq_len);
    WindowSampler sampler(corpus, seq_len, /*seed=*/how);
    const int batch = 3;
    std::vector<std::int32_t> inputs(static_cast<std::size_t>(batch * seq_len)), targets(inputs.size());
    for (int step = 0; step < 4; ++step) {
      sampler.next_group_batch(batch, step % n_members, n_members, inputs.data(), targets.data());
      for (std::size_t i = 0; i < inputs.size(); ++i)
        MERIDIAN_FUZZ_EXPECT(inputs[i] < vocab && targets[i] < vocab);
    }
    const std::uint64_t far = 7 * sampler.windows_per_epoch(0) + 5;
    sampler.seek({far, {far}});
    sampler.next_batch(batch, inputs.data(), targets.data());
  } catch (const Error&) {
  }
  return 0;
}

MERIDIAN_FUZZ_TARGET(tokens)
