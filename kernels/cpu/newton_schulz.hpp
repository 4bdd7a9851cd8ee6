#pragma once
// Muon's orthogonalization (Jordan et al. 2024): the quintic Newton-Schulz iteration that maps a
// matrix G = U S V^T to about U V^T (every singular value pushed towards 1) with matrix products
// only. X0 = G / ||G||_F; X <- a X + (b A + c A^2) X with A = X X^T, a, b, c = 3.4445, -4.7750,
// 2.0315 (tuned to pull small singular values up fast; they end in about [0.7, 1.2], not at 1).
// Done on the shape whose Gram matrix is the smaller one (X or X^T): the orthogonal factor of G^T
// is that of G, transposed.
namespace meridian::kernels {

inline constexpr int kNewtonSchulzSteps = 5;

// g: rows x cols, row-major; out: the same shape (may not alias g). `work` holds at least
// 2 * min^2 + rows * cols values (min = min(rows, cols)). T = float, or double for the reference.
template <class T>
void newton_schulz(const T* g, T* out, int rows, int cols, int steps, T* work);

// The `work` newton_schulz needs for a rows x cols matrix.
inline long newton_schulz_work(int rows, int cols) {
  const long m = rows < cols ? rows : cols;
  return 2 * m * m + static_cast<long>(rows) * cols;
}

}  // namespace meridian::kernels
