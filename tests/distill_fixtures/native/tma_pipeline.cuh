// Positive case for the native detectors (written for the distiller's tests):
// a warp-specialized, persistent FP8 GEMM skeleton on Hopper primitives.
#pragma once
#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>

namespace fix {

template <int kDims> struct LoadOp;
template <> struct LoadOp<2> { using Op = cute::SM90_TMA_LOAD_2D; };

template <uint32_t BLOCK_M, uint32_t BLOCK_N, uint32_t kNumStages>
__global__ __launch_bounds__(384, 1) void
fp8_gemm_kernel(float* sfa, float* sfb, const __grid_constant__ cute::TmaDescriptor tensor_map_a) {
    using Barrier = cutlass::arch::ClusterTransactionBarrier;
    __shared__ Barrier full_barriers[kNumStages];
    cudaGridDependencySynchronize();
    auto scheduler = Scheduler<BLOCK_M, BLOCK_N>();
    uint32_t m_idx, n_idx;
    if (threadIdx.x >= 256) {
        cutlass::arch::warpgroup_reg_dealloc<40>();
        while (scheduler.get_next_block(m_idx, n_idx)) {
            tma::copy<BLOCK_M, 128>(&tensor_map_a, &full_barriers[0], smem_a, m_idx);
            full_barriers[0].arrive_and_expect_tx(BLOCK_M * 128);
        }
    } else {
        cutlass::arch::warpgroup_reg_alloc<232>();
        float accum[64], final_accum[64];
        __nv_fp8_e4m3 probe;
        while (scheduler.get_next_block(m_idx, n_idx)) {
            full_barriers[0].wait(0);
            warpgroup_arrive();
            WGMMA::wgmma(desc_a, desc_b, accum, 0);
            warpgroup_commit_batch();
            warpgroup_wait<0>();
            const float scale = sfa[m_idx] * sfb[n_idx];
            for (int i = 0; i < 64; ++i)
                final_accum[i] += scale * accum[i];
            if constexpr (kNumStages > 2) {
                cute::tma_store_fence();
            }
        }
    }
}

}  // namespace fix
