// The C++ host path of exported CUDA ops: a boxed CUDA kernel per op that looks the call signature up among the
// plans Python installed, allocates the outputs and scratch from torch's CUDA caching allocator (straight from
// the allocator, not through at::empty's dispatch; the first output and every scratch buffer share one block,
// so a call makes one allocation where it made 1 + #scratch: see `Layout`), sets each scratch buffer that needs
// its init with one cuMemsetD*Async (none where a launch overwrites it whole), patches pointers and tensor maps into the argument
// block and calls cuLaunchKernel on torch's current stream (cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_COOPERATIVE for
// a cooperative launch: the capturable form, see `_cuda.py`). A signature without a plan (or a TMA input whose base is not
// 16-byte aligned) goes to the op's Python route (`<op>_route`), which runs it and may install a plan.
// The out-variant `<op>_out(outs..., inputs..., workspace)` runs the same plans with the caller's outputs and
// scratch in the caller's workspace (`OutKernel`): it checks them (`check_out`: the messages of the Python path's
// `_out.check`) and allocates nothing.
//
// Part of an exported package (copied verbatim by `cake export`, built by `_launcher.py` on first import where a
// C++ compiler and CUDA's cuda.h exist; links against torch's libc10 and libtorch_cpu only). No host synchronization, no allocation outside torch: capturable.
// The plan format is written by `_launcher.encode_plan`; PLAN_FORMAT here and there must agree.

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <c10/util/SmallVector.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <cuda.h>
#include <dlfcn.h>
#include <torch/library.h>
#if __has_include(<c10/cuda/impl/cuda_cmake_macros.h>)  // a CUDA torch's headers (a CPU wheel lacks this one)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#define CAKE_LAUNCHER_C10_CUDA 1
#endif

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace cake_launcher {

constexpr int64_t PLAN_FORMAT = 3;  // 3: each launch says whether it is cooperative
constexpr size_t TMAP_BYTES = 128;
constexpr size_t TMAP_CACHE_MAX = 512;  // per slot; cleared when full (as the Python path's cache)
// Where a scratch buffer starts inside the call's block: TMA needs 16-byte global addresses; 256 bytes keeps
// each buffer on its own L2 sectors and matches the alignment of cudaMalloc.
constexpr size_t SCRATCH_ALIGN = 256;

// ------------------------------------------------------------------------------------------ the driver

struct Driver {
  decltype(&cuLaunchKernel) launch = nullptr;
  decltype(&cuLaunchKernelEx) launch_ex = nullptr;  // cooperative launches
  decltype(&cuMemsetD32Async) memset32 = nullptr;
  decltype(&cuMemsetD16Async) memset16 = nullptr;
  decltype(&cuMemsetD8Async) memset8 = nullptr;
  decltype(&cuTensorMapEncodeTiled) encode = nullptr;
  decltype(&cuGetErrorName) error_name = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) ctx_retain = nullptr;
  decltype(&cuCtxSetCurrent) ctx_set = nullptr;
};

template <class F>
void resolve(void* handle, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  TORCH_CHECK(fn != nullptr, "cake launcher: libcuda.so.1 has no ", name, " (driver too old?)");
}

// The driver's entry points by their unversioned names, as the ctypes path calls them (libcuda keeps those
// names for the ABI they were first published with).
const Driver& driver() {
  static const Driver d = [] {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    TORCH_CHECK(handle != nullptr, "cake launcher: cannot load the CUDA driver (libcuda.so.1): ", dlerror());
    Driver out;
    resolve(handle, out.launch, "cuLaunchKernel");
    resolve(handle, out.launch_ex, "cuLaunchKernelEx");
    resolve(handle, out.memset32, "cuMemsetD32Async");
    resolve(handle, out.memset16, "cuMemsetD16Async");
    resolve(handle, out.memset8, "cuMemsetD8Async");
    resolve(handle, out.encode, "cuTensorMapEncodeTiled");
    resolve(handle, out.error_name, "cuGetErrorName");
    resolve(handle, out.device_get, "cuDeviceGet");
    resolve(handle, out.ctx_retain, "cuDevicePrimaryCtxRetain");
    resolve(handle, out.ctx_set, "cuCtxSetCurrent");
    return out;
  }();
  return d;
}

std::string error_name(CUresult code) {
  const char* name = nullptr;
  if (driver().error_name(code, &name) != CUDA_SUCCESS || name == nullptr) return std::to_string(int(code));
  return name;
}

// A thread's first CUDA work may find no context current: adopt torch's (the device's primary context).
void make_context_current(int device) {
  CUdevice dev;
  CUcontext ctx;
  CUresult code = driver().device_get(&dev, device);
  if (code == CUDA_SUCCESS) code = driver().ctx_retain(&ctx, dev);
  if (code == CUDA_SUCCESS) code = driver().ctx_set(ctx);
  TORCH_CHECK(code == CUDA_SUCCESS, "cake launcher: cannot make device ", device,
              "'s primary context current: ", error_name(code));
}

// torch's current stream on the device (vLLM captures graphs on its own stream). With a CUDA torch's headers
// through c10::cuda (linked against libc10_cuda); a CPU torch's headers (the CPU tests' build) have only the
// device-generic interface.
CUstream current_stream(const at::Device& device) {
#ifdef CAKE_LAUNCHER_C10_CUDA
  return c10::cuda::getCurrentCUDAStream(device.index()).stream();
#else
  return static_cast<CUstream>(
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device).native_handle());
#endif
}

// ---------------------------------------------------------------------------------------------- plans

constexpr int64_t MOST = 1 << 20;  // a bound on every count in a plan: a corrupt plan is refused, not followed

// The dtype codes of the plan format (`_launcher.DTYPE_CODES`).
at::ScalarType scalar_type(int64_t code) {
  switch (code) {
    case 0: return at::kFloat;
    case 1: return at::kHalf;
    case 2: return at::kBFloat16;
    case 3: return at::kInt;
    case 4: return at::kLong;
    case 5: return at::kBool;
  }
  TORCH_CHECK(false, "cake launcher: unknown dtype code ", code, " in a plan");
}

struct Reader {
  const std::vector<int64_t>& data;
  size_t at = 0;
  int64_t next() {
    TORCH_CHECK(at < data.size(), "cake launcher: plan ends early (", data.size(), " values)");
    return data[at++];
  }
  int64_t count(int64_t most) {
    int64_t n = next();
    TORCH_CHECK(n >= 0 && n <= most, "cake launcher: a plan count ", n, " is outside [0, ", most, "]");
    return n;
  }
};

struct Buffer {  // an output or a scratch buffer
  at::ScalarType dtype;
  std::vector<int64_t> sizes;
  int64_t memset_width = 0;  // 1, 2, 4: the cuMemsetD*Async that sets it; 0: not set (an output, or a scratch
                             // buffer a launch overwrites whole before any read)
  uint32_t bits = 0;
  size_t units = 0;
  size_t bytes = 0;
  size_t offset = 0;  // a scratch buffer's byte offset inside the call's block (`Layout`)
  size_t workspace_offset = 0;  // its byte offset inside an out-variant caller's workspace
};

// One allocation a call: the first output's bytes, then each scratch buffer at the next SCRATCH_ALIGN
// boundary. The first output is a tensor over the whole block (its storage is longer than its elements: the
// scratch tail stays allocated while the output lives; nothing else refers to it once the call's launches,
// queued on the call's stream, have run). An op without outputs keeps the block as a bare allocation for the
// call. Each allocation through the caching allocator takes its lock, searches its pools and updates its
// statistics, and so does each free: sharing the block saves both per scratch buffer.
// SEPARATE_ENV=1 gives every scratch buffer an allocation of its own again (session 5's host path), read
// when a plan is installed: for measuring what the shared block saves in one session, not for serving.
struct Layout {
  bool shared = true;       // false: one allocation per output and per scratch buffer
  size_t block_bytes = 0;
  bool in_output = false;   // the block is the first output's storage
  bool bare = false;        // no output: the block is a bare allocation for the call (when it has bytes)
  int64_t allocations = 0;  // per call
  size_t workspace_bytes = 0;  // the out-variant's workspace: the scratch buffers alone, from offset 0
};
constexpr const char* SEPARATE_ENV = "CAKE_LAUNCHER_SEPARATE_SCRATCH";

size_t align_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

Layout layout_of(std::vector<Buffer>& outputs, std::vector<Buffer>& scratch) {
  Layout l;
  for (Buffer& b : scratch) {  // the workspace: `_kernels.workspace_layout` computes the same offsets
    b.workspace_offset = align_up(l.workspace_bytes, SCRATCH_ALIGN);
    l.workspace_bytes = b.workspace_offset + b.bytes;
  }
  const char* separate = std::getenv(SEPARATE_ENV);
  l.shared = separate == nullptr || std::strcmp(separate, "1") != 0;
  if (!l.shared) {
    l.allocations = int64_t(outputs.size() + scratch.size());
    return l;
  }
  l.in_output = !outputs.empty();
  size_t end = l.in_output ? outputs.front().bytes : 0;
  for (Buffer& b : scratch) {
    b.offset = align_up(end, SCRATCH_ALIGN);
    end = b.offset + b.bytes;
  }
  l.block_bytes = end;
  l.bare = !l.in_output && end > 0;
  l.allocations = int64_t(outputs.size()) + (l.bare ? 1 : 0);
  return l;
}

// torch's CUDA caching allocator, called directly: at::empty would go through the dispatcher for the same
// allocation. A CPU torch's headers (the CPU tests' build, which runs no CUDA call) name it through the
// device-generic registry.
c10::Allocator* cuda_allocator() {
#ifdef CAKE_LAUNCHER_C10_CUDA
  return c10::cuda::CUDACachingAllocator::get();
#else
  return c10::GetAllocator(c10::DeviceType::CUDA);
#endif
}

// A contiguous output tensor of `b`'s shape over `bytes` (at least its own) of the allocator's memory.
at::Tensor output_over(const Buffer& b, c10::DataPtr data, size_t bytes, c10::Allocator* allocator) {
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), int64_t(bytes),
                                                       std::move(data), allocator, /*resizable=*/true);
  auto tensor = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(std::move(storage)),
                                                         c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                                         c10::scalarTypeToTypeMeta(b.dtype));
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(b.sizes);
  return tensor;
}

struct TensorMapSlot {
  size_t offset;
  int64_t source;
  CUtensorMapDataType dtype;
  cuuint32_t rank;
  cuuint64_t dims[5];
  cuuint64_t strides[4];
  cuuint32_t box[5];
  cuuint32_t unit[5];
  CUtensorMapSwizzle swizzle;
  std::mutex mu;
  std::unordered_map<uint64_t, CUtensorMap> cache;

  void write(uint8_t* block, uint64_t ptr) {
    std::lock_guard<std::mutex> lock(mu);
    auto hit = cache.find(ptr);
    if (hit == cache.end()) {
      if (cache.size() >= TMAP_CACHE_MAX) cache.clear();
      CUtensorMap map;
      CUresult code = driver().encode(&map, dtype, rank, reinterpret_cast<void*>(ptr), dims, strides, box, unit,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      TORCH_CHECK(code == CUDA_SUCCESS, "cake launcher: cuTensorMapEncodeTiled failed: ", error_name(code));
      hit = cache.emplace(ptr, map).first;
    }
    std::memcpy(block + offset, &hit->second, TMAP_BYTES);
  }
};

struct Launch {
  CUfunction function;
  unsigned grid[3];
  unsigned threads;
  unsigned smem;
  bool cooperative;  // the whole grid resident at once (grid-wide barriers): cuLaunchKernelEx with the attribute
  std::vector<uint8_t> block;  // strides and dims written; pointers and maps patched per call
  std::vector<std::pair<size_t, int64_t>> pointers;  // (byte offset, source)
  std::vector<std::unique_ptr<TensorMapSlot>> tmaps;
};

struct Plan {
  std::vector<int64_t> key;
  std::vector<Buffer> outputs, scratch;
  Layout layout;
  std::vector<int64_t> tma_inputs;
  std::vector<Launch> launches;
};


std::unique_ptr<Plan> parse(const std::vector<int64_t>& data, int64_t n_inputs) {
  Reader r{data};
  TORCH_CHECK(r.next() == PLAN_FORMAT, "cake launcher: plan format differs from ", PLAN_FORMAT,
              " (the package's _launcher.py and _launcher.cpp disagree)");
  auto plan = std::make_unique<Plan>();
  auto buffers = [&](std::vector<Buffer>& out, bool scratch) {
    for (int64_t i = 0, n = r.count(64); i < n; ++i) {
      Buffer b;
      b.dtype = scalar_type(r.next());
      for (int64_t d = 0, rank = r.count(8); d < rank; ++d) b.sizes.push_back(r.next());
      if (scratch) {
        b.memset_width = r.next();
        TORCH_CHECK(b.memset_width == 0 || b.memset_width == 1 || b.memset_width == 2 || b.memset_width == 4,
                    "cake launcher: memset width ", b.memset_width);
        b.bits = static_cast<uint32_t>(r.next());
        b.units = static_cast<size_t>(r.next());
      }
      int64_t numel = 1;
      for (int64_t s : b.sizes) {
        TORCH_CHECK(s >= 0 && s <= MOST * MOST, "cake launcher: a buffer dim ", s);
        numel *= s;
      }
      b.bytes = size_t(numel) * c10::elementSize(b.dtype);
      out.push_back(std::move(b));
    }
  };
  buffers(plan->outputs, false);
  buffers(plan->scratch, true);
  plan->layout = layout_of(plan->outputs, plan->scratch);
  const int64_t sources = n_inputs + int64_t(plan->outputs.size()) + int64_t(plan->scratch.size());
  auto source = [&]() {
    int64_t s = r.next();
    TORCH_CHECK(s >= 0 && s < sources, "cake launcher: source ", s, " outside [0, ", sources, ")");
    return s;
  };
  for (int64_t i = 0, n = r.count(64); i < n; ++i) plan->tma_inputs.push_back(source());
  for (int64_t i = 0, n = r.count(16); i < n; ++i) {
    Launch l;
    l.function = reinterpret_cast<CUfunction>(static_cast<uintptr_t>(r.next()));
    for (auto& g : l.grid) g = static_cast<unsigned>(r.next());
    l.threads = static_cast<unsigned>(r.next());
    l.smem = static_cast<unsigned>(r.next());
    const int64_t cooperative = r.next();
    TORCH_CHECK(cooperative == 0 || cooperative == 1, "cake launcher: cooperative flag ", cooperative);
    l.cooperative = cooperative == 1;
    const int64_t size = r.count(MOST);
    l.block.resize(size_t(size));
    for (int64_t p = 0, np = r.count(256); p < np; ++p) {
      int64_t offset = r.next();
      TORCH_CHECK(offset >= 0 && offset + 8 <= size, "cake launcher: pointer at ", offset, " outside the block");
      l.pointers.emplace_back(size_t(offset), source());
    }
    for (int64_t t = 0, nt = r.count(64); t < nt; ++t) {
      auto slot = std::make_unique<TensorMapSlot>();
      int64_t offset = r.next();
      TORCH_CHECK(offset >= 0 && offset + int64_t(TMAP_BYTES) <= size, "cake launcher: map at ", offset,
                  " outside the block");
      slot->offset = size_t(offset);
      slot->source = source();
      slot->dtype = static_cast<CUtensorMapDataType>(r.next());
      slot->rank = static_cast<cuuint32_t>(r.count(5));
      TORCH_CHECK(slot->rank >= 1, "cake launcher: a tensor map of rank 0");
      for (cuuint32_t d = 0; d < slot->rank; ++d) slot->dims[d] = static_cast<cuuint64_t>(r.next());
      for (cuuint32_t d = 0; d + 1 < slot->rank; ++d) slot->strides[d] = static_cast<cuuint64_t>(r.next());
      for (cuuint32_t d = 0; d < slot->rank; ++d) slot->box[d] = static_cast<cuuint32_t>(r.next());
      for (cuuint32_t d = 0; d < slot->rank; ++d) slot->unit[d] = 1;
      slot->swizzle = static_cast<CUtensorMapSwizzle>(r.next());
      l.tmaps.push_back(std::move(slot));
    }
    for (int64_t w = 0; w < (size + 7) / 8; ++w) {  // the block's bytes, 8 to a value, little-endian
      uint64_t word = static_cast<uint64_t>(r.next());
      std::memcpy(l.block.data() + 8 * w, &word, std::min<size_t>(8, size_t(size - 8 * w)));
    }
    plan->launches.push_back(std::move(l));
  }
  TORCH_CHECK(r.at == data.size(), "cake launcher: ", data.size() - r.at, " values after the plan");
  return plan;
}

// The signature a plan is keyed by: each input's device, dtype, sizes and strides (every device: a plan never
// takes an input from another device than the call it was validated for).
void signature(const torch::jit::Stack& stack, size_t first, int64_t n, std::vector<int64_t>& key) {
  key.clear();
  for (int64_t i = 0; i < n; ++i) {
    const at::Tensor& t = stack[first + size_t(i)].toTensor();
    key.push_back(static_cast<int64_t>(t.device().type()));
    key.push_back(t.device().index());
    key.push_back(static_cast<int64_t>(t.scalar_type()));
    key.push_back(t.dim());
    for (int64_t s : t.sizes()) key.push_back(s);
    for (int64_t s : t.strides()) key.push_back(s);
  }
}

// Whether every TMA input of `plan` starts at a 16-byte aligned address (else the Python route copies it).
bool tma_aligned(const Plan& plan, const torch::jit::Stack& stack, size_t first) {
  for (int64_t s : plan.tma_inputs) {
    if (reinterpret_cast<uintptr_t>(stack[first + size_t(s)].toTensor().data_ptr()) % 16) return false;
  }
  return true;
}

template <class F>
void retrying(int device, const char* what, F call) {
  CUresult code = call();
  if (code == CUDA_ERROR_INVALID_CONTEXT) {
    make_context_current(device);
    code = call();
  }
  TORCH_CHECK(code == CUDA_SUCCESS, "cake launcher: ", what, " failed: ", error_name(code));
}

// A plan's work on `stream`: each scratch buffer that needs its init set by one memset, then each launch with
// this call's pointers (`ptrs`: the inputs, the outputs, the scratch buffers) and tensor maps patched in.
void launch_plan(Plan& plan, const uint64_t* ptrs, int64_t n_inputs, int device, CUstream stream) {
  size_t index = size_t(n_inputs) + plan.outputs.size();
  for (const Buffer& b : plan.scratch) {
    CUdeviceptr at = static_cast<CUdeviceptr>(ptrs[index++]);
    if (b.memset_width == 0) continue;  // overwritten by a launch before any read
    retrying(device, "cuMemsetD*Async of a scratch buffer", [&] {
      switch (b.memset_width) {
        case 4: return driver().memset32(at, b.bits, b.units, stream);
        case 2: return driver().memset16(at, static_cast<unsigned short>(b.bits), b.units, stream);
        default: return driver().memset8(at, static_cast<unsigned char>(b.bits), b.units, stream);
      }
    });
  }
  for (Launch& l : plan.launches) {
    alignas(64) uint8_t stack_block[1024];
    std::vector<uint8_t> heap_block;
    uint8_t* block = stack_block;
    if (l.block.size() > sizeof(stack_block)) {
      heap_block.resize(l.block.size());
      block = heap_block.data();
    }
    std::memcpy(block, l.block.data(), l.block.size());
    for (const auto& [offset, source] : l.pointers) std::memcpy(block + offset, &ptrs[size_t(source)], 8);
    for (auto& slot : l.tmaps) slot->write(block, ptrs[size_t(slot->source)]);
    void* params[] = {block};
    if (l.cooperative) {
      CUlaunchAttribute attribute{};
      attribute.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attribute.value.cooperative = 1;
      CUlaunchConfig config{l.grid[0], l.grid[1], l.grid[2], l.threads, 1, 1, l.smem, stream, &attribute, 1};
      retrying(device, "cuLaunchKernelEx (cooperative)",
               [&] { return driver().launch_ex(&config, l.function, params, nullptr); });
      continue;
    }
    retrying(device, "cuLaunchKernel", [&] {
      return driver().launch(l.function, l.grid[0], l.grid[1], l.grid[2], l.threads, 1, 1, l.smem, stream,
                             params, nullptr);
    });
  }
}

// -------------------------------------------------------------------------------------------- the kernel

class LaunchKernel final : public c10::OperatorKernel {
 public:
  LaunchKernel(c10::OperatorHandle route, int64_t n_inputs) : route_(std::move(route)), n_inputs_(n_inputs) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t first = stack->size() - size_t(n_inputs_);
    Plan* plan = launchable(*stack, first);
    if (plan == nullptr) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      route_.callBoxed(stack);
      return;
    }
    hits_.fetch_add(1, std::memory_order_relaxed);
    run(*plan, stack, first);
  }

  void install(const std::vector<at::Tensor>& inputs, const std::vector<int64_t>& data) {
    TORCH_CHECK(int64_t(inputs.size()) == n_inputs_, "cake launcher: ", inputs.size(), " inputs, the op takes ",
                n_inputs_);
    torch::jit::Stack stack(inputs.begin(), inputs.end());
    auto plan = parse(data, n_inputs_);
    signature(stack, 0, n_inputs_, plan->key);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& p : plans_) {
      if (p->key == plan->key) return;  // installed by another thread first: the plans are the same
    }
    plans_.push_back(std::move(plan));
  }

  std::vector<int64_t> stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {hits_.load(), misses_.load(), int64_t(plans_.size())};
  }

  int64_t n_inputs() const { return n_inputs_; }

  // The plan for `inputs`' signature, or nullptr.
  Plan* plan_for(const std::vector<at::Tensor>& inputs) {
    TORCH_CHECK(int64_t(inputs.size()) == n_inputs_, "cake launcher: ", inputs.size(), " inputs, the op takes ",
                n_inputs_);
    torch::jit::Stack stack(inputs.begin(), inputs.end());
    std::vector<int64_t> key;
    signature(stack, 0, n_inputs_, key);
    return find(key);
  }

  // The plan a call with its inputs at `stack[first:]` can launch: its signature's plan, unless a TMA input sits
  // at an address the plan's tensor maps cannot take (the route copies it); nullptr sends the call to the route.
  Plan* launchable(const torch::jit::Stack& stack, size_t first) {
    thread_local std::vector<int64_t> key;
    signature(stack, first, n_inputs_, key);
    Plan* plan = find(key);
    return plan != nullptr && tma_aligned(*plan, stack, first) ? plan : nullptr;
  }

  Plan* find(const std::vector<int64_t>& key) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& p : plans_) {
      if (p->key == key) return p.get();
    }
    return nullptr;
  }

  // The per-call memory of the plan for `inputs`' signature: [allocations a call makes, the block's bytes, 1 if
  // the first output is its storage, then each scratch buffer's byte offset in it (none where SEPARATE_ENV
  // gave them allocations of their own)]; empty without a plan.
  std::vector<int64_t> layout(const std::vector<at::Tensor>& inputs) {
    TORCH_CHECK(int64_t(inputs.size()) == n_inputs_, "cake launcher: ", inputs.size(), " inputs, the op takes ",
                n_inputs_);
    torch::jit::Stack stack(inputs.begin(), inputs.end());
    std::vector<int64_t> key;
    signature(stack, 0, n_inputs_, key);
    Plan* plan = find(key);
    if (plan == nullptr) return {};
    const Layout& l = plan->layout;
    std::vector<int64_t> out{l.allocations, int64_t(l.block_bytes), l.in_output ? 1 : 0};
    if (l.shared) {
      for (const Buffer& b : plan->scratch) out.push_back(int64_t(b.offset));
    }
    return out;
  }

 private:
  void run(Plan& plan, torch::jit::Stack* stack, size_t first) {
    const at::Tensor& lead = (*stack)[first].toTensor();
    const int device = lead.device().index();
    c10::DeviceGuard guard(lead.device());
    c10::SmallVector<uint64_t, 16> ptrs;
    for (int64_t i = 0; i < n_inputs_; ++i) {
      ptrs.push_back(reinterpret_cast<uint64_t>((*stack)[first + size_t(i)].toTensor().data_ptr()));
    }
    // One block holds the first output and the scratch (`Layout`). Without outputs the block lives until
    // this returns: freed with work still queued is safe, since the caching allocator hands a block back out
    // only to later work on the same stream (or, while a graph is captured, keeps it in the graph's private
    // pool); as an output's storage it lives as long as the output.
    c10::Allocator* allocator = cuda_allocator();
    c10::DataPtr memory;
    if (plan.layout.in_output || plan.layout.bare) memory = allocator->allocate(plan.layout.block_bytes);
    const uint64_t base = reinterpret_cast<uint64_t>(memory.get());
    c10::SmallVector<at::Tensor, 4> outs;
    for (size_t i = 0; i < plan.outputs.size(); ++i) {
      const Buffer& b = plan.outputs[i];
      if (i == 0 && plan.layout.in_output) {
        outs.push_back(output_over(b, std::move(memory), plan.layout.block_bytes, allocator));
      } else {
        outs.push_back(output_over(b, allocator->allocate(b.bytes), b.bytes, allocator));
      }
      ptrs.push_back(reinterpret_cast<uint64_t>(outs.back().data_ptr()));
    }
    c10::SmallVector<c10::DataPtr, 4> separate;  // SEPARATE_ENV only; freed when this returns, as the block
    for (const Buffer& b : plan.scratch) {
      if (plan.layout.shared) {
        ptrs.push_back(base + b.offset);
      } else {
        separate.push_back(allocator->allocate(b.bytes));
        ptrs.push_back(reinterpret_cast<uint64_t>(separate.back().get()));
      }
    }
    launch_plan(plan, ptrs.data(), n_inputs_, device, current_stream(lead.device()));
    torch::jit::drop(*stack, size_t(n_inputs_));
    for (auto& t : outs) stack->emplace_back(std::move(t));
  }

  c10::OperatorHandle route_;
  int64_t n_inputs_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Plan>> plans_;
  std::atomic<int64_t> hits_{0}, misses_{0};
};

// ------------------------------------------------------------------------------------ the out-variant

// torch's Python name of a dtype (`torch.int32`): a refusal reads the same on either host path.
std::string torch_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kDouble: return "torch.float64";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kShort: return "torch.int16";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kBool: return "torch.bool";
    default: return std::string("torch.") + c10::toString(t);
  }
}

// A shape or strides as Python prints a tuple: "(1, 256)", "(5,)".
std::string tuple_text(c10::IntArrayRef values) {
  std::string text = "(";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + (values.size() == 1 ? ",)" : ")");
}

// The bytes a tensor's elements cover, [first, end); {0, 0} for an empty tensor (`_out.span`).
std::pair<int64_t, int64_t> span(const at::Tensor& t) {
  if (t.numel() == 0) return {0, 0};
  int64_t low = 0, high = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.stride(d);
    (reach < 0 ? low : high) += reach;
  }
  const auto base = static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
  const auto size = static_cast<int64_t>(t.element_size());
  return {base + low * size, base + (high + 1) * size};
}

bool overlap(std::pair<int64_t, int64_t> a, std::pair<int64_t, int64_t> b) {
  return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}

// What an out-variant's messages name: the op (`kmeans_assign`), its out-variant, the package's namespace, and
// the argument names of the out-variant's schema (outputs, inputs, workspace).
struct OutNames {
  std::string op, out, ns;
  std::vector<std::string> args;
};

constexpr const char* ALIAS_RULE = " in memory; outputs must not alias the inputs, each other or the workspace";

// `_out.check`'s checks in its order and words, against the plan of the inputs' signature: each output's dtype,
// device, shape and contiguity; the workspace's dtype, device, contiguity, size and alignment; no output
// overlapping an input, another output or the workspace. Refused before any work is queued: never a fault.
void check_out(const Plan& plan, const OutNames& names, c10::ArrayRef<const at::Tensor*> outs,
               c10::ArrayRef<const at::Tensor*> inputs, const at::Tensor* workspace) {
  const std::string& name = names.out;
  TORCH_CHECK(plan.outputs.size() == outs.size(), "cake launcher: ", name, " has ", outs.size(),
              " outputs, its plan ", plan.outputs.size());
  const at::Device device = inputs[0]->device();
  for (size_t i = 0; i < outs.size(); ++i) {
    const at::Tensor& out = *outs[i];
    const Buffer& b = plan.outputs[i];
    const std::string& arg = names.args[i];
    TORCH_CHECK_TYPE(out.scalar_type() == b.dtype, name, ": `", arg, "` must be ", torch_name(b.dtype), ", got ",
                     torch_name(out.scalar_type()));
    TORCH_CHECK_VALUE(out.device() == device, name, ": `", arg, "` is on ", out.device().str(), ", the inputs on ",
                      device.str());
    TORCH_CHECK_VALUE(out.sizes() == c10::IntArrayRef(b.sizes), name, ": `", arg, "` must have shape ",
                      tuple_text(b.sizes), " for these inputs, got ", tuple_text(out.sizes()));
    TORCH_CHECK_VALUE(out.is_contiguous(), name, ": `", arg, "` must be contiguous, got strides ",
                      tuple_text(out.strides()));
  }
  if (workspace != nullptr) {
    TORCH_CHECK_TYPE(workspace->scalar_type() == at::kByte, name, ": `workspace` must be torch.uint8, got ",
                     torch_name(workspace->scalar_type()));
    TORCH_CHECK_VALUE(workspace->device() == device, name, ": `workspace` is on ", workspace->device().str(),
                      ", the inputs on ", device.str());
    TORCH_CHECK_VALUE(workspace->is_contiguous(), name, ": `workspace` must be contiguous, got strides ",
                      tuple_text(workspace->strides()));
  }
  const int64_t need = int64_t(plan.layout.workspace_bytes);
  if (need > 0) {
    // built only when a check fails (the macros format their message then): nothing per call
    auto sizing = [&] { return names.ns + ".workspace_bytes('" + names.op + "', *inputs)"; };
    TORCH_CHECK_VALUE(workspace != nullptr, name, ": these inputs need a workspace of ", need,
                      " bytes: pass workspace=torch.empty(", need, ", dtype=torch.uint8, device=...) (its size: ",
                      sizing(), ")");
    TORCH_CHECK_VALUE(workspace->numel() >= need, name, ": `workspace` holds ", workspace->numel(),
                      " bytes, these inputs need ", need, " (", sizing(), ")");
    const auto offset = reinterpret_cast<uintptr_t>(workspace->data_ptr()) % SCRATCH_ALIGN;
    TORCH_CHECK_VALUE(offset == 0, name, ": `workspace` must start at a ", SCRATCH_ALIGN,
                      "-byte aligned address (a fresh torch.empty does), got ", offset, " bytes past one");
  }
  c10::SmallVector<std::pair<int64_t, int64_t>, 4> spans;
  for (const at::Tensor* t : inputs) spans.push_back(span(*t));
  const auto used = need > 0 ? span(*workspace) : std::pair<int64_t, int64_t>{0, 0};
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto mine = span(*outs[i]);
    const std::string& arg = names.args[i];
    for (size_t j = 0; j < inputs.size(); ++j) {
      TORCH_CHECK_VALUE(!overlap(mine, spans[j]), name, ": `", arg, "` overlaps the input `",
                        names.args[outs.size() + j], "`", ALIAS_RULE);
    }
    for (size_t j = 0; j < i; ++j) {
      TORCH_CHECK_VALUE(!overlap(mine, span(*outs[j])), name, ": `", arg, "` overlaps the output `", names.args[j],
                        "`", ALIAS_RULE);
    }
    TORCH_CHECK_VALUE(!overlap(mine, used), name, ": `", arg, "` overlaps `workspace`", ALIAS_RULE);
  }
  for (size_t j = 0; j < inputs.size(); ++j) {
    TORCH_CHECK_VALUE(!overlap(used, spans[j]), name, ": `workspace` overlaps the input `",
                      names.args[outs.size() + j], "`", ALIAS_RULE);
  }
}

// `<op>_out(outs..., inputs..., workspace=None) -> ()`: the functional kernel's plans (keyed by the inputs'
// signature) run into the caller's outputs, with each scratch buffer at its `workspace_offset` in the caller's
// workspace: no allocation. A signature without a plan goes to `<op>_out_route` (Python: `ExportedOp.call_out`),
// which checks, runs and installs the plan for both kernels.
class OutKernel final : public c10::OperatorKernel {
 public:
  OutKernel(LaunchKernel* plans, c10::OperatorHandle route, OutNames names, int64_t n_outputs)
      : plans_(plans), route_(std::move(route)), names_(std::move(names)), n_outputs_(size_t(n_outputs)) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t n_inputs = size_t(plans_->n_inputs());
    const size_t first = stack->size() - n_outputs_ - n_inputs - 1;
    Plan* plan = plans_->launchable(*stack, first + n_outputs_);
    if (plan == nullptr) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      route_.callBoxed(stack);
      return;
    }
    hits_.fetch_add(1, std::memory_order_relaxed);
    run(*plan, stack, first);
  }

  // The checks alone, on the tensors of a would-be call (`check_out` op: tests and debugging, any device):
  // false when no plan matches the inputs' signature (a call would go to the Python route).
  bool check(const std::vector<at::Tensor>& outs, const std::vector<at::Tensor>& inputs,
             const std::optional<at::Tensor>& workspace) {
    Plan* plan = plans_->plan_for(inputs);
    if (plan == nullptr) return false;
    TORCH_CHECK(outs.size() == n_outputs_, "cake launcher: ", outs.size(), " outputs, ", names_.out, " takes ",
                n_outputs_);
    c10::SmallVector<const at::Tensor*, 4> o, i;
    for (const auto& t : outs) o.push_back(&t);
    for (const auto& t : inputs) i.push_back(&t);
    check_out(*plan, names_, o, i, workspace.has_value() ? &*workspace : nullptr);
    return true;
  }

  std::pair<int64_t, int64_t> stats() const { return {hits_.load(), misses_.load()}; }

 private:
  void run(Plan& plan, torch::jit::Stack* stack, size_t first) {
    const size_t n_inputs = size_t(plans_->n_inputs());
    c10::SmallVector<const at::Tensor*, 4> outs, inputs;
    for (size_t i = 0; i < n_outputs_; ++i) outs.push_back(&(*stack)[first + i].toTensor());
    for (size_t i = 0; i < n_inputs; ++i) inputs.push_back(&(*stack)[first + n_outputs_ + i].toTensor());
    const c10::IValue& given = (*stack)[first + n_outputs_ + n_inputs];
    const at::Tensor* workspace = given.isNone() ? nullptr : &given.toTensor();
    check_out(plan, names_, outs, inputs, workspace);
    const at::Tensor& lead = *inputs[0];
    c10::DeviceGuard guard(lead.device());
    c10::SmallVector<uint64_t, 16> ptrs;
    for (const at::Tensor* t : inputs) ptrs.push_back(reinterpret_cast<uint64_t>(t->data_ptr()));
    for (const at::Tensor* t : outs) ptrs.push_back(reinterpret_cast<uint64_t>(t->data_ptr()));
    const uint64_t base = workspace != nullptr ? reinterpret_cast<uint64_t>(workspace->data_ptr()) : 0;
    for (const Buffer& b : plan.scratch) ptrs.push_back(base + b.workspace_offset);  // none without scratch
    // Written through raw pointers: bump each output's version as an in-place op does (autograd checks it);
    // before the launches, so that an inference tensor outside inference mode is refused with nothing queued.
    for (const at::Tensor* t : outs) t->unsafeGetTensorImpl()->bump_version();
    launch_plan(plan, ptrs.data(), int64_t(n_inputs), lead.device().index(), current_stream(lead.device()));
    torch::jit::drop(*stack, n_outputs_ + n_inputs + 1);
  }

  LaunchKernel* plans_;
  c10::OperatorHandle route_;
  OutNames names_;
  size_t n_outputs_;
  std::atomic<int64_t> hits_{0}, misses_{0};
};

// ------------------------------------------------------------------------------------- registration

struct Attached {
  std::unique_ptr<torch::Library> library;
  LaunchKernel* kernel;  // owned by the dispatcher's registration
  std::string ns, op;
  std::unique_ptr<torch::Library> autograd;  // the AutogradCUDA registrations (`bypass_autograd`), if any
  std::unique_ptr<torch::Library> out_library;  // the out-variant's CUDA registration (`attach_out`)
  OutKernel* out = nullptr;  // owned by that registration
  std::string out_op;
};

// The same kernel (LaunchKernel or OutKernel), reached from the AutogradCUDA key.
template <class Kernel>
class AtAutograd final : public c10::OperatorKernel {
 public:
  explicit AtAutograd(Kernel* kernel) : kernel_(kernel) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    (*kernel_)(op, keys, stack);
  }

 private:
  Kernel* kernel_;
};

std::mutex attached_mu;
std::vector<Attached> attached;

LaunchKernel& kernel(int64_t table) {
  std::lock_guard<std::mutex> lock(attached_mu);
  TORCH_CHECK(table >= 0 && table < int64_t(attached.size()), "cake launcher: no table ", table);
  return *attached[size_t(table)].kernel;
}

OutKernel& out_kernel(int64_t table) {
  std::lock_guard<std::mutex> lock(attached_mu);
  TORCH_CHECK(table >= 0 && table < int64_t(attached.size()), "cake launcher: no table ", table);
  TORCH_CHECK(attached[size_t(table)].out != nullptr, "cake launcher: table ", table, " has no out-variant");
  return *attached[size_t(table)].out;
}

// Register the C++ kernel as `ns::op`'s CUDA implementation, `ns::route` its way back to Python.
int64_t attach(const std::string& ns, const std::string& op, const std::string& route, int64_t n_inputs) {
  auto handle = c10::Dispatcher::singleton().findSchemaOrThrow((ns + "::" + route).c_str(), "");
  auto owned = std::make_unique<LaunchKernel>(handle, n_inputs);
  LaunchKernel* raw = owned.get();
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::CUDA, __FILE__,
                                                  __LINE__);
  library->impl(op.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::move(owned)));
  std::lock_guard<std::mutex> lock(attached_mu);
  attached.push_back({std::move(library), raw, ns, op, nullptr, nullptr, nullptr, {}});
  return int64_t(attached.size()) - 1;
}

// Register `table`'s out-variant `ns::op_out` (outputs first, then the inputs, then `workspace`): an OutKernel
// over the same plans as its CUDA implementation, `ns::route` its way back to Python.
void attach_out(int64_t table, const std::string& op_out, const std::string& route, int64_t n_outputs) {
  std::lock_guard<std::mutex> lock(attached_mu);
  TORCH_CHECK(table >= 0 && table < int64_t(attached.size()), "cake launcher: no table ", table);
  Attached& a = attached[size_t(table)];
  TORCH_CHECK(a.out == nullptr, "cake launcher: ", a.ns, "::", op_out, " is attached already");
  auto& dispatcher = c10::Dispatcher::singleton();
  auto handle = dispatcher.findSchemaOrThrow((a.ns + "::" + route).c_str(), "");
  const auto& schema = dispatcher.findSchemaOrThrow((a.ns + "::" + op_out).c_str(), "").schema();
  OutNames names{a.op, op_out, a.ns, {}};
  for (const auto& arg : schema.arguments()) names.args.push_back(arg.name());
  TORCH_CHECK(int64_t(names.args.size()) == n_outputs + a.kernel->n_inputs() + 1, "cake launcher: ", op_out,
              " takes ", names.args.size(), " arguments, not ", n_outputs, " outputs, ", a.kernel->n_inputs(),
              " inputs and a workspace");
  auto owned = std::make_unique<OutKernel>(a.kernel, handle, std::move(names), n_outputs);
  a.out = owned.get();
  a.out_op = op_out;
  a.out_library = std::make_unique<torch::Library>(torch::Library::IMPL, a.ns, c10::DispatchKey::CUDA, __FILE__,
                                                   __LINE__);
  a.out_library->impl(op_out.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::move(owned)));
}

// Register the kernels at AutogradCUDA too, for an op whose outputs are never differentiable (integer ids): a
// call then skips autograd's not-implemented fallback, which per call walks the arguments for requires_grad,
// walks the schema's returns, sets a thread-local dispatch guard and redispatches below ADInplaceOrView, all to
// attach nothing to an integer output. The out-variant (when attached) comes along: it bumps its outputs'
// versions itself, as the fallback's in-place handling would. Python decides which ops qualify
// (`ExportedOp.register`). Idempotent.
void bypass_autograd(int64_t table) {
  std::lock_guard<std::mutex> lock(attached_mu);
  TORCH_CHECK(table >= 0 && table < int64_t(attached.size()), "cake launcher: no table ", table);
  Attached& a = attached[size_t(table)];
  if (a.autograd) return;
  a.autograd = std::make_unique<torch::Library>(torch::Library::IMPL, a.ns, c10::DispatchKey::AutogradCUDA,
                                                __FILE__, __LINE__);
  a.autograd->impl(a.op.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                     std::make_unique<AtAutograd<LaunchKernel>>(a.kernel)));
  if (a.out != nullptr) {
    a.autograd->impl(a.out_op.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                           std::make_unique<AtAutograd<OutKernel>>(a.out)));
  }
}

void install(int64_t table, const std::vector<at::Tensor>& inputs, const std::vector<int64_t>& plan) {
  kernel(table).install(inputs, plan);
}

// [calls launched, routed to Python, plans, out-variant calls launched, routed]
std::vector<int64_t> stats(int64_t table) {
  std::vector<int64_t> out = kernel(table).stats();
  std::pair<int64_t, int64_t> more{0, 0};
  {
    std::lock_guard<std::mutex> lock(attached_mu);
    if (table < int64_t(attached.size()) && attached[size_t(table)].out != nullptr) {
      more = attached[size_t(table)].out->stats();
    }
  }
  out.push_back(more.first);
  out.push_back(more.second);
  return out;
}

// The out-variant's workspace for `inputs`' signature: [bytes, each scratch buffer's offset]; empty without a plan.
std::vector<int64_t> workspace(int64_t table, const std::vector<at::Tensor>& inputs) {
  Plan* plan = kernel(table).plan_for(inputs);
  if (plan == nullptr) return {};
  std::vector<int64_t> out{int64_t(plan->layout.workspace_bytes)};
  for (const Buffer& b : plan->scratch) out.push_back(int64_t(b.workspace_offset));
  return out;
}

int64_t check_out_args(int64_t table, const std::vector<at::Tensor>& outs, const std::vector<at::Tensor>& inputs,
                       const std::optional<at::Tensor>& workspace) {
  return out_kernel(table).check(outs, inputs, workspace) ? 1 : 0;
}

std::vector<int64_t> layout(int64_t table, const std::vector<at::Tensor>& inputs) {
  return kernel(table).layout(inputs);
}

int64_t plan_format() { return PLAN_FORMAT; }

}  // namespace cake_launcher

TORCH_LIBRARY(cake_launcher_v3, m) {
  m.def("attach(str ns, str op, str route, int n_inputs) -> int", &cake_launcher::attach);
  m.def("install(int table, Tensor[] inputs, int[] plan) -> ()", &cake_launcher::install);
  m.def("stats(int table) -> int[]", &cake_launcher::stats);
  m.def("layout(int table, Tensor[] inputs) -> int[]", &cake_launcher::layout);
  m.def("bypass_autograd(int table) -> ()", &cake_launcher::bypass_autograd);
  m.def("attach_out(int table, str op_out, str route, int n_outputs) -> ()", &cake_launcher::attach_out);
  m.def("workspace(int table, Tensor[] inputs) -> int[]", &cake_launcher::workspace);
  m.def("check_out(int table, Tensor[] outs, Tensor[] inputs, Tensor? workspace) -> int",
        &cake_launcher::check_out_args);
  m.def("plan_format() -> int", &cake_launcher::plan_format);
}
