// The f32 arithmetic rate of the GPU, the floor that kernels' FLOP are compared against:
// mul+add (a product and a sum as two correctly rounded instructions, `__fmul_rn` and
// `__fadd_rn` so nvcc cannot contract them: what baro emits, which never uses fma) and fma
// (`__fmaf_rn`, one instruction for both). 8 independent chains per thread hide latency.
// Built and run on the GPU machine by prefill_run.sh: nvcc -O3 -arch=sm_90 fp32_rate.cu.
#include <cstdio>
#include <cuda_runtime.h>

template <bool FMA>
__global__ void chains(float* out, float a, float b, int iters) {
  float x[8];
  for (int c = 0; c < 8; c++) x[c] = threadIdx.x + c;
  for (int i = 0; i < iters; i++) {
#pragma unroll
    for (int c = 0; c < 8; c++) x[c] = FMA ? __fmaf_rn(x[c], a, b) : __fadd_rn(__fmul_rn(x[c], a), b);
  }
  float s = 0;
  for (int c = 0; c < 8; c++) s += x[c];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <bool FMA>
double rate(float* out, int blocks, int threads, int iters) {
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  chains<FMA><<<blocks, threads>>>(out, 0.999f, 0.001f, iters);  // warm-up
  cudaEventRecord(t0);
  chains<FMA><<<blocks, threads>>>(out, 0.999f, 0.001f, iters);
  cudaEventRecord(t1);
  cudaEventSynchronize(t1);
  float ms = 0;
  cudaEventElapsedTime(&ms, t0, t1);
  return 2.0 * 8 * (double)iters * blocks * threads / (ms * 1e-3) / 1e12;  // 2 FLOP per link
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int blocks = sms * 16, threads = 256, iters = 1 << 15;
  float* out;
  if (cudaMalloc(&out, sizeof(float) * blocks * threads) != cudaSuccess) { fprintf(stderr, "cudaMalloc failed\n"); return 1; }
  double muladd = rate<false>(out, blocks, threads, iters), fma = rate<true>(out, blocks, threads, iters);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) { fprintf(stderr, "%s\n", cudaGetErrorString(e)); return 1; }
  printf("fp32 rate (%d SMs): mul+add %.2f TFLOP/s, fma %.2f TFLOP/s\n", sms, muladd, fma);
  printf("MULADD_TFLOPS=%.3f\n", muladd);
  return 0;
}
