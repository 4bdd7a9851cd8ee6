#include "core/config/job_config.hpp"
#include "core/device/cuda_probe.hpp"
#include "core/model/param_layout.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

void require_devices(const JobConfig& config, std::string_view site) {
  // fp32 weights, gradients and the two AdamW moments: a floor on what a replica needs on its GPU.
  const std::size_t state_bytes = 4 * sizeof(float) * ParamLayout::of(config.model).total();
  for (const auto& s : config.sites) {
    if (s.device != JobConfig::Site::Device::Cuda || (!site.empty() && s.name != site)) continue;
    try {
      require_cuda_device(0, state_bytes);
    } catch (const DeviceError& e) {
      throw DeviceError(e.problem(), "site " + s.name + ": " + e.what());
    }
  }
}

}  // namespace meridian::cli
