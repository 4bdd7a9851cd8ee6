#include "kernels/cpu/encoder.hpp"

#include <cstddef>

namespace meridian::kernels {

template <class T>
void encoder_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int B, int Tn, int C) {
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < B * Tn; ++bt) {
    const T* e = wte + static_cast<std::size_t>(tokens[bt]) * C;
    T* o = out + static_cast<std::size_t>(bt) * C;
    if (wpe == nullptr) {
      for (int c = 0; c < C; ++c) o[c] = e[c];
      continue;
    }
    const T* p = wpe + static_cast<std::size_t>(bt % Tn) * C;
    for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
  }
}

// Serial on purpose: rows scatter into shared token rows, and a fixed order keeps the sum
// bit-reproducible. It is O(B*T*C), negligible next to the matmuls.
template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const std::int32_t* tokens, int B, int Tn, int C) {
  for (int bt = 0; bt < B * Tn; ++bt) {
    const T* d = dout + static_cast<std::size_t>(bt) * C;
    T* e = dwte + static_cast<std::size_t>(tokens[bt]) * C;
    for (int c = 0; c < C; ++c) e[c] += d[c];
    if (dwpe == nullptr) continue;
    T* p = dwpe + static_cast<std::size_t>(bt % Tn) * C;
    for (int c = 0; c < C; ++c) p[c] += d[c];
  }
}

template void encoder_forward<float>(float*, const std::int32_t*, const float*, const float*, int, int, int);
template void encoder_forward<double>(double*, const std::int32_t*, const double*, const double*, int, int, int);
template void encoder_backward<float>(float*, float*, const float*, const std::int32_t*, int, int, int);
template void encoder_backward<double>(double*, double*, const double*, const std::int32_t*, int, int, int);

}  // namespace meridian::kernels
