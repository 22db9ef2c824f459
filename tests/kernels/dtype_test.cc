#include "attn/dtype.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace attn {
namespace {

TEST(DTypeTest, NamesParseBack) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    DType parsed;
    ASSERT_TRUE(ParseDType(DTypeName(dtype), &parsed));
    EXPECT_EQ(parsed, dtype);
  }
  DType parsed;
  EXPECT_FALSE(ParseDType("fp32", &parsed));
}

// Every finite 16-bit pattern survives bits -> float -> bits unchanged.
TEST(DTypeTest, EveryFiniteValueRoundTrips) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
      const float value = BitsToFloat(static_cast<uint16_t>(bits), dtype);
      if (std::isnan(value)) continue;
      ASSERT_EQ(FloatToBits(value, dtype), bits) << DTypeName(dtype) << " bits=" << bits;
    }
  }
}

TEST(DTypeTest, KnownValues) {
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalfBits(-2.5f), 0xc100);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(1e6f), 0x7c00);              // overflow -> inf
  EXPECT_EQ(FloatToHalfBits(5.960464477539063e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToBf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16Bits(-2.5f), 0xc020);
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(std::nanf("")))));
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(std::nanf("")))));
  EXPECT_EQ(HalfBitsToFloat(0x7c00), std::numeric_limits<float>::infinity());
}

// Halfway cases round to the even neighbour.
TEST(DTypeTest, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between fp16 1.0 and 1 + 2^-10: even is 1.0.
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 lies halfway between 1 + 2^-10 and 1 + 2^-9: even is the latter.
  EXPECT_EQ(FloatToHalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToBf16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBf16Bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
}

}  // namespace
}  // namespace attn
