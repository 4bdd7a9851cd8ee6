#pragma once
// [model] init_from: the weights a fresh job starts from instead of its seed's initialisation, on
// every replica of every site alike (so the sites' outer state starts from them too): continued
// pre-training or fine-tuning of a Hugging Face model, or of a meridian run.
#include <filesystem>
#include <vector>

#include "core/model/model_config.hpp"

namespace meridian {

// The weights at `from` (a Hugging Face model directory, a meridian run directory, checkpoints/
// directory or checkpoint file) in the flat layout of `shape`. Error(Config) naming `from` and the
// first difference when they are another model's (every field of the shape but seq_len must
// agree); the readers' Error(Data)/(Checkpoint)/(Io) when they cannot be read.
std::vector<float> load_init_from(const std::filesystem::path& from, const ModelConfig& shape);

// What `meridian validate` and `launch` check before anything runs: the same agreement, reading
// only config.json from a Hugging Face directory.
void check_init_from(const std::filesystem::path& from, const ModelConfig& shape);

}  // namespace meridian
