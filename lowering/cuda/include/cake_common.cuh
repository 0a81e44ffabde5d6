// cake_common.cuh -- what every CAKE-generated CUDA translation unit shares.
//
// Small, target-neutral device helpers: shared-memory addresses, lane/warp ids, and the tensor-map type
// that TMA descriptors travel in. Everything is `__device__ __forceinline__`, so a helper costs
// nothing unless generated code calls it, and a translation unit may inline this file verbatim.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define CAKE_DEVICE __device__ __forceinline__
#define CAKE_INF __int_as_float(0x7f800000)
#define CAKE_NAN __int_as_float(0x7fffffff)

// A CUtensorMap travels by value inside the kernel's __grid_constant__ argument block. It is declared here
// (same size and alignment as cuda.h's CUtensorMap) so that generated code needs no driver header.
struct alignas(64) CakeTensorMap {
  unsigned long long opaque[16];
};
static_assert(sizeof(CakeTensorMap) == 128, "CUtensorMap is 128 bytes");

// The 32-bit shared-window address of a generic pointer into shared memory (what PTX's .shared operands take).
CAKE_DEVICE uint32_t cake_smem_addr(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

CAKE_DEVICE int cake_lane_id() { return static_cast<int>(threadIdx.x & 31u); }
CAKE_DEVICE int cake_warp_id() { return static_cast<int>(threadIdx.x >> 5); }

CAKE_DEVICE int cake_cdiv(int a, int b) { return (a + b - 1) / b; }

// Rounds the dynamic shared-memory base up to `align` bytes (a power of two): the swizzled layouts that
// TMA writes and wgmma/tcgen05 read repeat on 1024-byte boundaries, which `extern __shared__` does not promise.
CAKE_DEVICE uint8_t* cake_align_smem(uint8_t* base, uint32_t align) {
  const uint32_t addr = cake_smem_addr(base);
  return base + (((addr + align - 1u) & ~(align - 1u)) - addr);
}

// Element conversions used by generated casts.
CAKE_DEVICE float cake_to_f32(float v) { return v; }
CAKE_DEVICE float cake_to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
CAKE_DEVICE float cake_to_f32(__half v) { return __half2float(v); }
CAKE_DEVICE float cake_to_f32(int v) { return static_cast<float>(v); }

// Copies the first `nbytes` (< 16) bytes of a row tail into a zeroed 16-byte vector.
template <typename T>
CAKE_DEVICE void cake_copy_partial(uint4* dst, const T* src, int nbytes) {
  T* out = reinterpret_cast<T*>(dst);
  for (int i = 0; i < nbytes / static_cast<int>(sizeof(T)); ++i) out[i] = src[i];
}

// Running arg-min update that keeps the first index on ties and never selects a NaN.
CAKE_DEVICE void cake_argmin_merge(float& best, int& best_i, float v, int i) {
  if (v < best || (v == best && i < best_i)) { best = v; best_i = i; }
}
CAKE_DEVICE void cake_argmax_merge(float& best, int& best_i, float v, int i) {
  if (v > best || (v == best && i < best_i)) { best = v; best_i = i; }
}

// One 16-byte shared-memory load (`ptr` 16-byte aligned). A plain C++ load, not asm: nvcc emits ld.shared.v4.u32
// for pointers into the kernel's shared array (every generated stage pointer is one), orders it after the
// barrier waits before it (their asm clobbers memory), and may still schedule independent loads early.
CAKE_DEVICE uint4 cake_lds_v4(const uint8_t* ptr) { return *reinterpret_cast<const uint4*>(ptr); }

// A 16-bit element from its bits, per element type (the tag argument picks the overload).
CAKE_DEVICE __nv_bfloat16 cake_half_from_bits(unsigned short bits, __nv_bfloat16) { return __ushort_as_bfloat16(bits); }
CAKE_DEVICE __half cake_half_from_bits(unsigned short bits, __half) { return __ushort_as_half(bits); }

// The eight 16-bit elements of a 16-byte chunk in memory order: element 2k is the low half of word k.
template <typename H>
CAKE_DEVICE void cake_unpack8(const uint4& v, H (&h)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    h[2 * k] = cake_half_from_bits(static_cast<unsigned short>(w[k] & 0xffffu), H{});
    h[2 * k + 1] = cake_half_from_bits(static_cast<unsigned short>(w[k] >> 16), H{});
  }
}
