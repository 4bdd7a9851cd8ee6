#pragma once
// Rotary position embeddings in Hugging Face's layout ("rotate half"): within each head of hs
// channels, channel i < hs/2 and channel i + hs/2 form a pair turned by the angle t * inv_freq[i]
// at position t:   x1' = x1 cos - x2 sin,   x2' = x2 cos + x1 sin.
#include <vector>

namespace meridian::kernels {

// The (T, hs/2) cosines and sines of the angles t * inv_freq[i], as Hugging Face computes them:
// inv_freq and each angle rounded to float, the cosine and sine of that angle then rounded to T.
template <class T>
void rope_table(T* cos, T* sin, const std::vector<double>& inv_freq, int Tn);

// In place on `heads` consecutive heads of hs channels at x[(b*T + t) * ld ...]:
// the rotation forward, or backward its transpose (the rotation by -angle) on their gradient.
template <class T>
void rope_forward(T* x, const T* cos, const T* sin, int B, int Tn, int heads, int hs, int ld);
template <class T>
void rope_backward(T* dx, const T* cos, const T* sin, int B, int Tn, int heads, int hs, int ld);

}  // namespace meridian::kernels
