// Negative case for the native detectors: a plain elementwise kernel and a grid-stride copy.
__global__ void scale_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

__global__ void grid_stride_copy(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = x[i];
    }
}

void launch(const float* x, float* y, int n, cudaStream_t s) {
    scale_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
}
