// Compiles for every architecture of the portable family.
__global__ void Store(int* out) { *out = 1; }
