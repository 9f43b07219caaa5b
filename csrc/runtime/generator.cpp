// One random generator per device, apart from the CPU's: seeding the device never moves the CPU
// stream. They are CPU (mt19937) generators because the CPU kernels draw from them, so values
// differ from a GPU's Philox for the same seed; a seed still gives the same sequence every run.
#include "shim.h"

#include <mutex>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GeneratorImpl.h>

namespace cudashim {

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::mutex mutex;
  static std::vector<at::Generator> generators;
  const auto i = check_index(index);
  std::lock_guard<std::mutex> lock(mutex);
  while (generators.size() <= static_cast<size_t>(i)) {
    generators.push_back(at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val));
  }
  return generators[i];
}

}  // namespace cudashim
