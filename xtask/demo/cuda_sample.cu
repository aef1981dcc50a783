// The demo's CUDA sample, profiled by nsight-agent's nsys backend when Nsight Systems and nvcc
// are installed: two kernels (saxpy, then a reduction) in a loop for the given number of
// seconds (default 600; the demo stops it when the session ends), so a collection of a few
// seconds sees many launches of each; an optional second argument caps the steps, so that two
// runs launch the same kernels (`cargo xtask gpu-check` compares profilers on it). Built by
// `cargo xtask demo` and the GPU check with `nvcc -O2`.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void sum_blocks(int n, const float* y, float* partial) {
  __shared__ float cache[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  cache[threadIdx.x] = i < n ? y[i] : 0.0f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) cache[threadIdx.x] += cache[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = cache[0];
}

static int check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cuda_sample: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
  return 0;
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 600.0;
  const long max_steps = argc > 2 ? std::atol(argv[2]) : -1;
  const int n = 1 << 22, threads = 256, blocks = (n + threads - 1) / threads;
  float *x, *y, *partial;
  check(cudaMalloc(&x, n * sizeof(float)), "cudaMalloc x");
  check(cudaMalloc(&y, n * sizeof(float)), "cudaMalloc y");
  check(cudaMalloc(&partial, blocks * sizeof(float)), "cudaMalloc partial");
  check(cudaMemset(x, 0, n * sizeof(float)), "cudaMemset x");
  check(cudaMemset(y, 0, n * sizeof(float)), "cudaMemset y");
  const auto start = std::chrono::steady_clock::now();
  long steps = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds &&
         (max_steps < 0 || steps < max_steps)) {
    saxpy<<<blocks, threads>>>(n, 2.0f, x, y);
    sum_blocks<<<blocks, threads>>>(n, y, partial);
    check(cudaDeviceSynchronize(), "kernel");
    ++steps;
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("cuda_sample: %ld steps in %.3f s: %.1f steps/s\n", steps, elapsed, steps / elapsed);
  cudaFree(x);
  cudaFree(y);
  cudaFree(partial);
  return 0;
}
