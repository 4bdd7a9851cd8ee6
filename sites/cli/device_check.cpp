#include "core/config/job_config.hpp"
#include "core/device/cuda_probe.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

void require_devices(const JobConfig& config, std::string_view site) {
  for (const auto& s : config.sites) {
    if (s.device != JobConfig::Site::Device::Cuda || (!site.empty() && s.name != site)) continue;
    CudaDevice gpu;
    try {
      gpu = require_cuda_device(0);
    } catch (const DeviceError& e) {
      throw DeviceError(e.problem(), "site " + s.name + ": " + e.what());
    }
    // The kernels exist (kernels/cuda) but the trainer does not run on them yet; training on the
    // CPU while the job file asks for a GPU would be a silent surprise.
    throw make_error(ErrorKind::Config, "site ", s.name, ": device = \"cuda\": found ", gpu.name,
                     ", but the trainer does not run on GPUs yet (the CUDA kernels exist, the model on them "
                     "does not; docs/gpu.md); set device = \"cpu\"");
  }
}

}  // namespace meridian::cli
