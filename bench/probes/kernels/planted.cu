// A tiny CUDA library for the kernels probe's device check: built once for the GPU's own
// architecture and once for another, it shows what a missing kernel image looks like.
#include <cuda_runtime.h>

__global__ void add_one(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

// Runs add_one on n floats; returns the CUDA error code (0 = success) and the values back in x.
extern "C" int planted_add_one(float *x, int n) {
  float *d = nullptr;
  cudaError_t err = cudaMalloc(&d, n * sizeof(float));
  if (err != cudaSuccess) return (int)err;
  cudaMemcpy(d, x, n * sizeof(float), cudaMemcpyHostToDevice);
  add_one<<<(n + 127) / 128, 128>>>(d, n);
  err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err == cudaSuccess) err = cudaMemcpy(x, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d);
  return (int)err;
}

extern "C" const char *planted_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }
