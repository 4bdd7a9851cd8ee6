#pragma once
// The round's view of a replica's Trainer: its weights, its step, and the tokens a step of the
// whole site learns from (its group's replicas, each with its micro-batches).
#include <cstdint>
#include <span>

#include "core/train/trainer.hpp"
#include "crosssite/round/training.hpp"

namespace meridian {

class TrainerTraining final : public Training {
 public:
  // `tokens_per_replica_step`: batch_per_replica x seq_len, per micro-batch.
  TrainerTraining(Trainer& trainer, int group_size, std::int64_t tokens_per_replica_step)
      : trainer_(trainer), group_size_(group_size), tokens_(tokens_per_replica_step) {}
  std::span<float> weights() override { return trainer_.model().params(); }
  std::span<float> held(ShardRange part, std::optional<ShardRange> mirror) override {
    return trainer_.holds_part_and_mirror(part, mirror) ? trainer_.part_and_mirror() : std::span<float>();
  }
  void held_written() override { trainer_.keep_part_and_mirror(); }
  std::int64_t step() const override { return trainer_.state().step; }
  void fast_forward(std::int64_t step) override { trainer_.fast_forward(step); }
  std::int64_t tokens_per_step() const override { return tokens_ * trainer_.grad_accum() * group_size_; }

 private:
  Trainer& trainer_;
  int group_size_;
  std::int64_t tokens_;
};

}  // namespace meridian
