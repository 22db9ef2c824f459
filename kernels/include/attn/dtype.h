// attn/dtype.h
//
// The 16-bit element types attnserve computes with, and host-side conversions
// between them and float. Conversions round to nearest-even, the same rounding
// the GPU's cvt.rn instructions use, so CPU and GPU paths quantise alike.
// Plain C++ (no CUDA, no Abseil): host and nvcc translation units include it.
#ifndef ATTN_DTYPE_H_
#define ATTN_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace attn {

enum class DType : int {
  kFloat16 = 0,   // IEEE binary16
  kBFloat16 = 1,  // bfloat16: float's exponent, 7 mantissa bits
};

inline constexpr size_t DTypeSize(DType) { return 2; }

// "fp16" or "bf16".
const char* DTypeName(DType dtype);

// Parses "fp16"/"float16"/"half" and "bf16"/"bfloat16"; false if unknown.
bool ParseDType(std::string_view text, DType* dtype);

inline float Bf16BitsToFloat(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

inline uint16_t FloatToBf16Bits(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  if ((word & 0x7f800000u) == 0x7f800000u && (word & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((word >> 16) | 0x0040u);  // quiet NaN
  }
  const uint32_t rounding = 0x7fffu + ((word >> 16) & 1u);  // nearest-even
  return static_cast<uint16_t>((word + rounding) >> 16);
}

float HalfBitsToFloat(uint16_t bits);
uint16_t FloatToHalfBits(float value);

inline float BitsToFloat(uint16_t bits, DType dtype) {
  return dtype == DType::kBFloat16 ? Bf16BitsToFloat(bits) : HalfBitsToFloat(bits);
}
inline uint16_t FloatToBits(float value, DType dtype) {
  return dtype == DType::kBFloat16 ? FloatToBf16Bits(value) : FloatToHalfBits(value);
}

// Bulk conversions of `count` elements between 16-bit storage and float.
void ToFloat(const void* src, DType dtype, size_t count, float* dst);
void FromFloat(const float* src, size_t count, DType dtype, void* dst);

}  // namespace attn

#endif  // ATTN_DTYPE_H_
