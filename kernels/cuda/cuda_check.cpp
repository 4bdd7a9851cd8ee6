#include "kernels/cuda/cuda_check.hpp"

#include <string>

namespace meridian::kernels::cuda {

void cuda_failed(const char* call, const char* error_name, const char* error_text, const char* file, int line) {
  throw CudaError(std::string(call) + " failed: " + error_name + " (" + error_text + ") at " + file + ":" +
                  std::to_string(line));
}

}  // namespace meridian::kernels::cuda
