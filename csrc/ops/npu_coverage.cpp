// The simulated NPU's operator coverage: torch_npu's table of NPU kernels decides what the fallback does.
//
// On a real NPU an operator without a kernel for PrivateUse1 (and without a composite one) reaches
// torch_npu's boxed fallback, npu_cpu_fallback (torch_npu/csrc/aten/VariableFallbackKernel.cpp): it
// refuses when TORCH_NPU_FALLBACK_CPU_DISABLE=1 (CheckCpuFallbackAllowed, CpuFallbackUtils.h), warns once
// per operator through torch_npu's warn_ (TORCH_NPU_WARN: c10's base warning handler, a log line on
// stderr, silenced by TORCH_NPU_WARNING_DISABLE=1 or TORCH_NPU_DISABLED_WARNING=1 and on ranks other than
// 0; OptionsManager::ShouldPrintWarning) and runs the CPU kernel, failing where the CPU has none. Sparse
// NPU tensors reach npu_Sparse_fallback, which raises. The table comes from Python (set_npu_native);
// until it is set nothing here runs, and the cuda build never sets it.
#include "call.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

namespace cudashim {
namespace {

std::unordered_set<std::string>& native() {
  static std::unordered_set<std::string> names;
  return names;
}
std::unordered_set<std::string>& sparse_native() {
  static std::unordered_set<std::string> names;
  return names;
}
bool g_active = false;
std::mutex g_mu;  // guards the warned set and the counts
std::unordered_set<std::string> g_warned;
std::unordered_map<std::string, int64_t> g_fallbacks;

// torch_npu reads its settings once (function-local statics in OptionsManager)
bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strtol(v, nullptr, 10) != 0;
}
bool fallback_allowed() {
  static const bool allowed = !env_flag("TORCH_NPU_FALLBACK_CPU_DISABLE");
  return allowed;
}
bool should_print_warning() {
  static const bool print = [] {
    const char* off = std::getenv("TORCH_NPU_WARNING_DISABLE");
    if (off == nullptr) off = std::getenv("TORCH_NPU_DISABLED_WARNING");
    if (off != nullptr && std::strtol(off, nullptr, 10) == 1) return false;
    const char* rank = std::getenv("RANK");
    const long r = rank != nullptr ? std::strtol(rank, nullptr, 10) : -1;
    return r == 0 || r == -1;
  }();
  return print;
}

// OPS_ERROR(ErrCode::NOT_SUPPORT): formatErrorCode(SubModule::OPS, ...) of NPUException.cpp
std::string ops_not_supported() {
  if (env_flag("TORCH_NPU_COMPACT_ERROR_OUTPUT")) return "";
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  const char* rank = std::getenv("RANK");
  std::ostringstream oss;
  oss << "\n[ERROR] " << std::put_time(std::localtime(&now), "%Y-%m-%d-%H:%M:%S") << " (PID:" << getpid()
      << ", Device:" << static_cast<int>(current_device()) << ", RankID:" << (rank != nullptr ? std::strtol(rank, nullptr, 10) : -1)
      << ") ERR01007 OPS feature not supported";
  return oss.str();
}

// torch_npu's words, at torch_npu's source location, through c10's base handler as warn_ sends them
void npu_warn(const std::string& msg) {
  if (!should_print_warning()) return;
  c10::WarningHandler base;
  base.process(c10::Warning(c10::UserWarning(), {"npu_cpu_fallback", "torch_npu/csrc/aten/VariableFallbackKernel.cpp", 226},
                            msg, false));
}

void npu_sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  const std::string name = c10::toString(op.schema().operator_name());
  TORCH_CHECK(sparse_native().count(name.substr(6)) == 0, "the simulated NPU has no sparse kernel for '", name,
              "' (torch_npu has one); run it on dense npu tensors or on the CPU");
  TORCH_CHECK(false, "CAUTION: The operator '", op.schema().operator_name(), "' is not currently supported on the NPU backend.",
              ops_not_supported());
}

}  // namespace

bool npu_coverage_active() { return g_active; }

// an operator outside the table at the fallback: what npu_cpu_fallback does before the CPU kernel runs
void npu_cpu_fallback_check(const c10::OperatorHandle& op) {
  // per thread: the decision for each operator is made once, without a lock on the hot path
  thread_local std::unordered_map<const void*, bool> decided;
  auto it = decided.find(&op.schema());
  if (C10_LIKELY(it != decided.end() && it->second)) return;
  const std::string name = c10::toString(op.schema().operator_name());
  if (it == decided.end()) {
    // the table names aten operators without their namespace; others by their qualified name (the
    // simulator's own operators, which stand for work torch_npu does natively)
    const bool is_native = native().count(name.rfind("aten::", 0) == 0 ? name.substr(6) : name) > 0;
    it = decided.emplace(&op.schema(), is_native).first;
    if (is_native) return;
  }
  TORCH_CHECK(fallback_allowed(), "The operator '", name,
              "' would execute its main computation on CPU through dispatcher backend fallback because no kernel is "
              "registered for the NPU PrivateUse1 backend, but CPU fallback is disabled by TORCH_NPU_FALLBACK_CPU_DISABLE=1.",
              ops_not_supported());
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_fallbacks[name];
    first = g_warned.insert(name).second;
  }
  if (first) {
    npu_warn("CAUTION: The operator '" + name +
             "' is not currently supported on the NPU backend and will fall back to run on the CPU. This may have "
             "performance implications.");
  }
}

void set_npu_native(const std::vector<std::string>& names, const std::vector<std::string>& sparse) {
  native().clear();
  native().insert(names.begin(), names.end());
  sparse_native().clear();
  sparse_native().insert(sparse.begin(), sparse.end());
  g_active = true;
}

bool npu_native(const std::string& name) { return native().count(name) > 0; }

std::unordered_map<std::string, int64_t> npu_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_fallbacks;
}

void register_npu_sparse() {
  static torch::Library m(torch::Library::IMPL, "_", c10::DispatchKey::SparsePrivateUse1, __FILE__, __LINE__);
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&npu_sparse_fallback>());
}

}  // namespace cudashim
