#include "core/model/language_model.hpp"

#include <algorithm>

#include "core/model/gpt.hpp"
#include "core/model/llama.hpp"
#include "core/util/error.hpp"

namespace meridian {

template <class T>
LanguageModel<T>::LanguageModel(const ModelConfig& config) : config_(config), layout_(ParamLayout::of(config)) {
  const auto problems = validate_model_config(config);
  MERIDIAN_CHECK(problems.empty(), "invalid model shape: ", problems.empty() ? "" : problems.front());
  params_.resize(layout_.total());  // zero, nothing written
  grads_.resize(layout_.total());
}

template <class T>
void LanguageModel<T>::zero_grads() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Cheap: return "cheap";
    case Recompute::Full: return "full";
  }
  return "?";
}

template <class T>
std::unique_ptr<LanguageModel<T>> make_model(const ModelConfig& config) {
  if (config.family == ModelFamily::Llama) return std::make_unique<Llama<T>>(config);
  return std::make_unique<Gpt<T>>(config);
}

template class LanguageModel<float>;
template class LanguageModel<double>;
template std::unique_ptr<LanguageModel<float>> make_model<float>(const ModelConfig&);
template std::unique_ptr<LanguageModel<double>> make_model<double>(const ModelConfig&);

}  // namespace meridian
