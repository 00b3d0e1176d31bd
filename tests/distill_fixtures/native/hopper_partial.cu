// Negative cases for the Hopper detectors (written for the distiller's tests): each
// function has part of a Hopper technique but not the part its pattern is known by.
#include <cuda_fp8.h>
#include <cuda_pipeline.h>

// TMA loads through one stage barrier, every warp in the same role: no producer/consumer
// register split (not warp-specialised), though it does use TMA descriptors.
__global__ void tma_single_role_kernel(const __grid_constant__ CUtensorMap tensor_map, float* out, int k_blocks) {
    __shared__ alignas(128) float tile[64 * 64];
    __shared__ cutlass::arch::ClusterTransactionBarrier full_barrier;
    float acc = 0.0f;
    for (int k = 0; k < k_blocks; ++k) {
        if (threadIdx.x == 0) {
            tma::copy<64, 64>(&tensor_map, &full_barrier, tile, k * 64);
            full_barrier.arrive_and_expect_tx(64 * 64 * sizeof(float));
        }
        full_barrier.wait(k & 1);
        acc += tile[threadIdx.x];
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// Ampere-style asynchronous copies into shared memory: no Tensor Memory Accelerator.
__global__ void cp_async_copy_kernel(const float4* x, float4* y, int n) {
    __shared__ float4 stage[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) __pipeline_memcpy_async(&stage[threadIdx.x], &x[i], sizeof(float4));
    __pipeline_commit();
    __pipeline_wait_prior(0);
    if (i < n) y[i] = stage[threadIdx.x];
}

// FP8 quantisation with one scale per tensor: FP8, but no per-block scale applied to partial sums.
__global__ void fp8_cast_kernel(const float* x, __nv_fp8_e4m3* y, float inv_scale, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __nv_fp8_e4m3(x[i] * inv_scale);
}

// A grid-stride loop in a device helper: the stride is the grid's, but the function is not a kernel.
__device__ void strided_device_loop(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = x[i];
    }
}
