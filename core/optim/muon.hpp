#pragma once
// Muon (Jordan et al. 2024, "Muon: an optimizer for hidden layers"): for each weight matrix of
// the transformer layers, momentum on the gradient, then the Newton-Schulz iteration
// (kernels/cpu/newton_schulz.hpp) replaces the update by its nearest semi-orthogonal matrix.
// Embeddings (and the output head tied to them), norms and biases stay with AdamW (MuLoCo,
// Thérien et al., uses the same split inside DiLoCo).
//
// The update is scaled by 0.2 * sqrt(max(rows, cols)) (Liu et al. 2025, "Muon is scalable for
// LLM training"): that gives it about AdamW's RMS, so one learning rate and one weight decay
// (decoupled, lr * wd * W, as AdamW's) serve both halves of the model.
//
// Muon keeps one buffer, the momentum, in AdamW's first-moment buffer at its matrices' offsets
// (AdamW never touches them under Muon): it checkpoints, heals and resumes as AdamW's state does.
#include <span>
#include <vector>

#include "core/model/param_layout.hpp"
#include "core/optim/adamw.hpp"

namespace meridian {

struct MuonOptions {
  float momentum = 0.95f;
  bool nesterov = true;
  int ns_steps = 5;
  float weight_decay = 0.1f;
};

// The views Muon updates: the transformer layers' 2-D weights (not the embeddings).
bool muon_takes(const ParamView& view);
// AdamW's decay ranges over the views Muon does not take: AdamW's share under Muon.
std::vector<DecayRange> ranges_without_muon(const ParamLayout& layout);

class Muon {
 public:
  Muon(const ParamLayout& layout, MuonOptions options);

  // Muon's views only: momentum <- mu momentum + g, u = g + mu momentum (Nesterov) or momentum,
  // params -= lr (0.2 sqrt(max(r, c)) NS(u) + wd params). `momentum` is the layout's flat buffer.
  void step(std::span<float> params, std::span<const float> grads, std::span<float> momentum, float lr);

 private:
  MuonOptions options_;
  std::vector<ParamView> views_;
  std::vector<float> update_, orthogonal_, work_;  // scratch, sized for the largest matrix
};

}  // namespace meridian
