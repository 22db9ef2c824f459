#include "attn/dtype.h"

#include <cmath>

namespace attn {

const char* DTypeName(DType dtype) {
  return dtype == DType::kBFloat16 ? "bf16" : "fp16";
}

bool ParseDType(std::string_view text, DType* dtype) {
  if (text == "bf16" || text == "bfloat16") {
    *dtype = DType::kBFloat16;
    return true;
  }
  if (text == "fp16" || text == "float16" || text == "half") {
    *dtype = DType::kFloat16;
    return true;
  }
  return false;
}

float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t word;
  if (exponent == 0x1f) {  // inf or NaN
    word = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    word = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // zero
    word = sign;
  } else {  // subnormal: normalise
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    word = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

uint16_t FloatToHalfBits(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  const uint16_t sign = static_cast<uint16_t>((word >> 16) & 0x8000u);
  const uint32_t abs_word = word & 0x7fffffffu;
  if (abs_word >= 0x7f800000u) {  // inf or NaN
    return sign | (abs_word > 0x7f800000u ? 0x7e00u : 0x7c00u);
  }
  if (abs_word >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    return sign | 0x7c00u;
  }
  if (abs_word < 0x38800000u) {  // below the smallest normal half: subnormal
    // Scale so the half subnormal grid (2^-24) becomes integers, then round.
    float magnitude;
    std::memcpy(&magnitude, &abs_word, sizeof(magnitude));
    const float scaled = magnitude * 16777216.0f;  // 2^24
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent, round the 13 dropped bits to nearest-even.
  const uint32_t rebased = abs_word - (112u << 23);
  const uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return sign | static_cast<uint16_t>((rebased + rounding) >> 13);
}

void ToFloat(const void* src, DType dtype, size_t count, float* dst) {
  const uint16_t* bits = static_cast<const uint16_t*>(src);
  if (dtype == DType::kBFloat16) {
    for (size_t i = 0; i < count; ++i) dst[i] = Bf16BitsToFloat(bits[i]);
  } else {
    for (size_t i = 0; i < count; ++i) dst[i] = HalfBitsToFloat(bits[i]);
  }
}

void FromFloat(const float* src, size_t count, DType dtype, void* dst) {
  uint16_t* bits = static_cast<uint16_t*>(dst);
  if (dtype == DType::kBFloat16) {
    for (size_t i = 0; i < count; ++i) bits[i] = FloatToBf16Bits(src[i]);
  } else {
    for (size_t i = 0; i < count; ++i) bits[i] = FloatToHalfBits(src[i]);
  }
}

}  // namespace attn
