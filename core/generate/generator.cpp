#include "core/generate/generator.hpp"

#include <algorithm>

#include "core/generate/decoder.hpp"
#include "core/util/error.hpp"

namespace meridian {

namespace {

void check(std::span<const std::int32_t> prompt, const GenerateOptions& o) {
  if (prompt.empty()) throw make_error(ErrorKind::Usage, "the prompt has no tokens");
  if (o.max_new_tokens < 1)
    throw make_error(ErrorKind::Usage, "max_new_tokens must be at least 1, not ", o.max_new_tokens);
  if (const auto problems = validate_sampling(o.sampling); !problems.empty())
    throw make_error(ErrorKind::Usage, problems.front());
}

}  // namespace

Generation generate(const ModelConfig& config, std::span<const float> params, std::span<const std::int32_t> prompt,
                    const GenerateOptions& o, const std::function<void(std::int32_t)>& on_token) {
  check(prompt, o);
  const std::size_t wanted = prompt.size() + static_cast<std::size_t>(o.max_new_tokens);
  const int window = static_cast<int>(std::min<std::size_t>(config.positions(), wanted));
  const auto decoder = make_decoder(config, params, window);
  Generation g;
  g.prompt_unseen = prompt.size() > static_cast<std::size_t>(window) ? prompt.size() - window : 0;
  std::vector<std::int32_t> held(prompt.begin() + static_cast<std::ptrdiff_t>(g.prompt_unseen), prompt.end());
  std::span<const float> logits = decoder->feed(held);
  Rng rng(o.seed);
  for (int i = 0; i < o.max_new_tokens; ++i) {
    const std::int32_t next = sample_token(logits, o.sampling, rng);
    g.tokens.push_back(next);
    if (on_token) on_token(next);
    if (o.stop_token && next == *o.stop_token) {
      g.stopped = true;
      break;
    }
    if (i + 1 == o.max_new_tokens) break;  // its logits would go unused
    held.push_back(next);
    if (decoder->position() < window) {
      logits = decoder->feed(std::span<const std::int32_t>(&held.back(), 1));
      continue;
    }
    held.erase(held.begin(), held.end() - std::max<std::ptrdiff_t>(1, window / 2));
    decoder->reset();
    logits = decoder->feed(held);
    ++g.slides;
  }
  return g;
}

}  // namespace meridian
