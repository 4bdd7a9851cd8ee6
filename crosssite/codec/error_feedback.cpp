#include "crosssite/codec/error_feedback.hpp"

#include <algorithm>

#include "core/util/error.hpp"

namespace meridian {

float feedback_decay(CodecKind kind) { return kind == CodecKind::Sparse ? 0.95f : 1.0f; }

ErrorFeedback::ErrorFeedback(std::size_t n, float decay) : decay_(decay), residual_(n, 0.0f), sent_(n) {
  MERIDIAN_CHECK(decay >= 0.0f && decay <= 1.0f, "error feedback decay ", decay);
}

std::vector<std::byte> ErrorFeedback::encode(std::span<const float> x, const CodecOptions& options) {
  MERIDIAN_CHECK(x.size() == residual_.size(), "error feedback over ", residual_.size(), " values got ", x.size());
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; ++i) sent_[i] = x[i] + decay_ * residual_[i];
  std::vector<std::byte> bytes(encoded_size(n, options));
  meridian::encode(sent_, options, bytes);
  // The old residual is folded into sent_, so its storage receives the decoded value.
  decode(bytes, residual_);
  for (std::size_t i = 0; i < n; ++i) residual_[i] = sent_[i] - residual_[i];
  return bytes;
}

void ErrorFeedback::reset() { std::fill(residual_.begin(), residual_.end(), 0.0f); }

void ErrorFeedback::restore(std::span<const float> residual) {
  if (residual.empty()) return reset();
  MERIDIAN_CHECK(residual.size() == residual_.size(), "residual of ", residual.size(), " values for ",
                 residual_.size());
  std::copy(residual.begin(), residual.end(), residual_.begin());
}

}  // namespace meridian
