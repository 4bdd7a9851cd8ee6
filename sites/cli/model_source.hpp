#pragma once
// Where the commands that read a trained model (eval, generate) find it.
#include <string>

#include "core/train/train_checkpoint.hpp"

namespace meridian::cli {

// A meridian checkpoint (a file, a checkpoints/ directory or a run directory: the newest that
// verifies, a warning for each skipped), or a Hugging Face model directory read as `meridian
// import` reads it, its tokenizer.json kept when it has one. seq_len > 0 sets the shape's window
// (Error(Usage) past the model's context).
ModelSnapshot model_at(const std::string& path, int seq_len);

}  // namespace meridian::cli
