#include "core/hf/dtype.hpp"

namespace meridian {

std::optional<HfDtype> parse_hf_dtype(std::string_view name) {
  if (name == "F32") return HfDtype::F32;
  if (name == "BF16") return HfDtype::BF16;
  if (name == "F16") return HfDtype::F16;
  return std::nullopt;
}

std::string_view to_string(HfDtype dtype) {
  switch (dtype) {
    case HfDtype::F32: return "F32";
    case HfDtype::BF16: return "BF16";
    case HfDtype::F16: return "F16";
  }
  return "?";
}

std::string_view torch_dtype_name(HfDtype dtype) {
  switch (dtype) {
    case HfDtype::F32: return "float32";
    case HfDtype::BF16: return "bfloat16";
    case HfDtype::F16: return "float16";
  }
  return "?";
}

}  // namespace meridian
