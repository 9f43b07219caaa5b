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
//
// The dtype checks torch_npu's kernels make themselves (TORCH_CHECK in op-plugin's op_api kernels, each
// cited in torch_npu_dtype_checks.json) come from Python too (set_npu_dtype_checks): an operator with
// checks refuses, before its kernel runs, a call whose argument dtypes meet one, in torch_npu's words and
// with the error code torch_npu appends (formatErrorCode, NPUException.cpp).
#include "call.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <bitset>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <mutex>
#include <optional>
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
// one TORCH_CHECK of a torch_npu kernel: it refuses when every condition holds; the message shows one
// argument's dtype where torch_npu's does (as a ScalarType, "Double", or as a TypeMeta, "double")
struct DtypeCheck {
  std::vector<std::pair<size_t, std::bitset<128>>> when;  // (argument index, its refused ScalarTypes)
  std::string before, after;  // the message around the shown dtype
  int64_t shown = -1;         // argument index whose dtype the message shows, or -1
  bool meta = false;          // shown as TypeMeta (tensor.dtype()) rather than ScalarType
  std::string code;           // "ERR01002 OPS invalid type": what OPS_ERROR / PTA_ERROR appends
};
std::unordered_map<std::string, std::vector<DtypeCheck>>& dtype_checks() {
  static std::unordered_map<std::string, std::vector<DtypeCheck>> checks;
  return checks;
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

// formatErrorCode(submodule, code) of NPUException.cpp: "ERR01007 OPS feature not supported" for
// OPS_ERROR(ErrCode::NOT_SUPPORT)
std::string npu_error_code(const std::string& code) {
  if (env_flag("TORCH_NPU_COMPACT_ERROR_OUTPUT")) return "";
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  const char* rank = std::getenv("RANK");
  std::ostringstream oss;
  oss << "\n[ERROR] " << std::put_time(std::localtime(&now), "%Y-%m-%d-%H:%M:%S") << " (PID:" << getpid()
      << ", Device:" << static_cast<int>(current_device()) << ", RankID:" << (rank != nullptr ? std::strtol(rank, nullptr, 10) : -1)
      << ") " << code;
  return oss.str();
}
std::string ops_not_supported() { return npu_error_code("ERR01007 OPS feature not supported"); }

// a Tensor argument's dtype, a Scalar argument's type (a Python complex is ComplexDouble), else none
std::optional<c10::ScalarType> dtype_of(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? std::optional<c10::ScalarType>(t.scalar_type()) : std::nullopt;
  }
  if (v.isDouble() || v.isInt() || v.isBool() || v.isComplexDouble()) return v.toScalar().type();
  return std::nullopt;
}

void check_dtypes(const std::vector<DtypeCheck>& checks, const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const size_t n = op.schema().arguments().size();
  if (stack.size() < n) return;
  const size_t base = stack.size() - n;
  for (const DtypeCheck& c : checks) {
    bool refused = true;
    for (const auto& [index, dtypes] : c.when) {
      const auto t = index < n ? dtype_of(stack[base + index]) : std::nullopt;
      refused = refused && t.has_value() && dtypes.test(static_cast<size_t>(*t));
    }
    if (!refused) continue;
    std::string shown;
    if (c.shown >= 0) {
      const c10::IValue& v = stack[base + static_cast<size_t>(c.shown)];
      if (c.meta && v.isTensor()) {
        shown = std::string(v.toTensor().dtype().name());
      } else if (const auto t = dtype_of(v)) {
        shown = c10::toString(*t);
      }
    }
    TORCH_CHECK(false, c.before, shown, c.after, npu_error_code(c.code));
  }
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

struct Decided {
  bool native;
  const std::vector<DtypeCheck>* checks;
  // without an NPU kernel: the composite kernel that fills the NPU's slot on a real torch_npu (the
  // dispatcher's order: CompositeExplicitAutogradNonFunctional, CompositeExplicitAutograd,
  // CompositeImplicitAutograd), or Undefined when there is none and the CPU fallback takes the operator
  c10::DispatchKey composite;
};

c10::DispatchKey composite_of(const c10::OperatorHandle& op) {
  for (const auto key : {c10::DispatchKey::CompositeExplicitAutogradNonFunctional, c10::DispatchKey::CompositeExplicitAutograd,
                         c10::DispatchKey::CompositeImplicitAutograd}) {
    if (op.hasKernelForDispatchKey(key)) return key;
  }
  return c10::DispatchKey::Undefined;
}

// per thread: the decision for each operator is made once, without a lock on the hot path
const Decided& decided(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const void*, Decided> made;
  auto it = made.find(&op.schema());
  if (C10_UNLIKELY(it == made.end())) {
    // the table names aten operators without their namespace; others by their qualified name (the
    // simulator's own operators, which stand for work torch_npu does natively)
    const std::string full = c10::toString(op.schema().operator_name());
    const std::string key = full.rfind("aten::", 0) == 0 ? full.substr(6) : full;
    const auto found = dtype_checks().find(key);
    const bool has = native().count(key) > 0;
    it = made.emplace(&op.schema(), Decided{has, found == dtype_checks().end() ? nullptr : &found->second,
                                            has ? c10::DispatchKey::Undefined : composite_of(op)}).first;
  }
  return it->second;
}

}  // namespace

bool npu_coverage_active() { return g_active; }

void npu_kernel_check(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const Decided& d = decided(op);
  if (C10_UNLIKELY(d.checks != nullptr)) check_dtypes(*d.checks, op, stack);
}

// an operator at the fallback: torch_npu's dtype checks of its kernel, then, outside the table, what
// npu_cpu_fallback does before the CPU kernel runs
void npu_cpu_fallback_check(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const Decided& d = decided(op);
  if (C10_UNLIKELY(d.checks != nullptr)) check_dtypes(*d.checks, op, stack);
  if (C10_LIKELY(d.native)) return;
  const std::string name = c10::toString(op.schema().operator_name());
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

NpuKernel npu_core_kernel(const c10::OperatorHandle& op) {
  const Decided& d = decided(op);
  if (!d.native) return d.composite != c10::DispatchKey::Undefined ? NpuKernel::Composite : NpuKernel::Fallback;
  return d.checks != nullptr ? NpuKernel::Checked : NpuKernel::Plain;
}

bool npu_run_composite(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const Decided& d = decided(op);
  if (d.native || d.composite == c10::DispatchKey::Undefined) return false;
  op.callBoxedForDispatchKey(d.composite, *stack);
  return true;
}

void register_npu_sparse_kernels(const std::vector<std::string>& ops);  // sparse.cpp

void set_npu_native(const std::vector<std::string>& names, const std::vector<std::string>& sparse) {
  native().clear();
  native().insert(names.begin(), names.end());
  sparse_native().clear();
  sparse_native().insert(sparse.begin(), sparse.end());
  register_npu_sparse_kernels(sparse);
  g_active = true;
}

bool npu_native(const std::string& name) { return native().count(name) > 0; }

void set_npu_dtype_checks(const std::vector<NpuDtypeCheck>& checks, const std::vector<std::string>& whole) {
  auto& dispatcher = c10::Dispatcher::singleton();
  dtype_checks().clear();
  for (const NpuDtypeCheck& c : checks) {
    DtypeCheck d;
    for (const auto& [index, types] : c.when) {
      std::bitset<128> set;
      for (const c10::ScalarType t : types) set.set(static_cast<size_t>(t));
      d.when.emplace_back(index, set);
    }
    d.before = c.before;
    d.after = c.after;
    d.shown = c.shown;
    d.meta = c.meta;
    d.code = c.code;
    dtype_checks()[c.op].push_back(std::move(d));
  }
  // operators torch_npu runs as one kernel that PyTorch builds from a checked operator (a composite
  // without a CPU kernel): whole on the CPU, as register_cpu_kernels_direct does for those with one,
  // so the checked operator inside them is not seen as called
  static torch::Library lib(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  for (const std::string& name : whole) {
    const auto dot = name.find('.');
    const c10::OperatorName opname("aten::" + name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1));
    auto h = dispatcher.findOp(opname);
    TORCH_CHECK(h && h->hasSchema(), "torch_npu_dtype_checks.json names '", name, "' to run whole, which this torch lacks");
    if (h->hasKernelForDispatchKey(kKey)) continue;
    lib.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&fallback>());
  }
}

std::unordered_map<std::string, int64_t> npu_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_fallbacks;
}

namespace {
// round with decimals=0 of an int64 tensor. torch_npu's op_api kernel accepts int32 and int64
// (op-plugin op_plugin/ops/opapi/RoundDecimalsKernelNpuOpApi.cpp, round_decimals_check) and calls
// aclnnRoundDecimals, which runs an int64 tensor on the AI CPU (CANN ops-math
// math/round/op_host/op_api/round.cpp: int64 is not among a 910B's AI Core dtypes), whose integer
// branch for decimals=0 copies its input (math/round/op_kernel_aicpu/round_aicpu.cpp, RangeRound). The
// CPU has no integer kernel for it. Other decimals (the AI CPU kernel's integer arithmetic) and int32
// (a 910B's AI Core kernel, not published) take the fallback, which fails as the CPU does.
void npu_round_decimals(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  const size_t base = stack->size() - n;
  const c10::IValue& self = (*stack)[base];
  const bool out = op.schema().overload_name() == "decimals_out";
  const bool identity = self.isTensor() && self.toTensor().scalar_type() == at::kLong && (*stack)[base + 1].toInt() == 0 &&
                        (!out || (*stack)[base + 2].toTensor().scalar_type() == at::kLong);
  if (!identity) {
    fallback(op, stack);
    return;
  }
  const at::Tensor x = self.toTensor();
  at::Tensor result;
  if (out) {
    result = (*stack)[base + 2].toTensor();
    result.resize_(x.sizes());
    result.copy_(x);
  } else {
    result = op.schema().name() == "aten::round_" ? x : x.clone();
  }
  torch::jit::drop(*stack, n);
  stack->emplace_back(std::move(result));
}
}  // namespace

void register_npu_sparse() {
  static torch::Library m(torch::Library::IMPL, "_", c10::DispatchKey::SparsePrivateUse1, __FILE__, __LINE__);
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&npu_sparse_fallback>());
  static torch::Library kernels(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  for (const char* op : {"round.decimals", "round_.decimals", "round.decimals_out"}) {
    kernels.impl(op, torch::CppFunction::makeFromBoxedFunction<&npu_round_decimals>());
  }
}

}  // namespace cudashim
