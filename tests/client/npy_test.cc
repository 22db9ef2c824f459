// .npy reading and writing: NumPy's header rules, the dtypes Python tools
// write for fp16/bf16, and the errors for files that cannot be tensors.
#include "attn/client/npy.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "attn/client/attend_types.h"
#include "gtest/gtest.h"

namespace attn {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/attn_npy_test_", getpid(), "_", name);
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(NpyTest, HeaderFollowsNumPyLayout) {
  const std::string file = SerializeNpy("<f2", {1, 2, 3, 4}, std::string(48, '\0'));
  ASSERT_EQ(file.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = static_cast<unsigned char>(file[8]) |
                            (static_cast<size_t>(static_cast<unsigned char>(file[9])) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = file.substr(10, header_len);
  EXPECT_TRUE(absl::StartsWith(
      header, "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 2, 3, 4), }"));
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(file.size(), 10 + header_len + 48);
  EXPECT_TRUE(absl::StrContains(SerializeNpy("<f4", {5}, std::string(20, '\0')), "(5,)"));
}

TEST(NpyTest, ParsesWhatItWritesAndOtherVersions) {
  const std::string data = "abcdefgh";
  absl::StatusOr<NpyArray> array = ParseNpy(SerializeNpy("<V2", {2, 2}, data));
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->descr, "<V2");
  EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(array->data, data);

  // Version 2.0: four-byte header length; double quotes and no trailing comma.
  const std::string header = "{\"descr\": \"|u1\", \"shape\": (3,), \"fortran_order\": False}\n";
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) v2.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  v2 += header + "xyz";
  array = ParseNpy(v2);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->descr, "|u1");
  EXPECT_EQ(array->data, "xyz");
}

TEST(NpyTest, RejectsMalformedFiles) {
  EXPECT_FALSE(ParseNpy("not numpy at all").ok());
  std::string file = SerializeNpy("<f2", {2, 2}, std::string(8, '\0'));
  EXPECT_FALSE(ParseNpy(file.substr(0, file.size() - 1)).ok());  // truncated data
  EXPECT_FALSE(ParseNpy(SerializeNpy("<f2", {2, 2}, std::string(9, '\0'))).ok());
  std::string bad = file;
  bad.replace(bad.find("descr"), 5, "dexcr");
  EXPECT_FALSE(ParseNpy(bad).ok());
}

// Found by npy_fuzzer: the element count overflowed int64 (undefined
// behaviour) for dimensions a header may name.
TEST(NpyTest, RejectsShapesWhoseSizeOverflowsAndKeepsEmptyOnes) {
  const int64_t big = int64_t{1} << 32;
  absl::StatusOr<NpyArray> array = ParseNpy(SerializeNpy("<f2", {big, big, 1, 1}, ""));
  ASSERT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument) << array.status();
  EXPECT_EQ(array.status().message(),
            ".npy data has 0 bytes; dtype '<f2' and shape (4294967296, 4294967296, 1, 1) need "
            "2^63 or more");
  array = ParseNpy(SerializeNpy("<f2", {big, big, 0, big}, ""));  // no element at all
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_TRUE(array->data.empty());
  // As a tensor, Shape::NumElements would still overflow on the way to the 0.
  absl::StatusOr<NpyTensor> tensor = TensorFromNpy(*array, std::nullopt);
  ASSERT_EQ(tensor.status().code(), absl::StatusCode::kInvalidArgument) << tensor.status();
  EXPECT_EQ(tensor.status().message(),
            "shape (4294967296, 4294967296, 0, 4294967296) has too many elements to count in 64 "
            "bits");
}

TEST(NpyTest, TensorRoundTripForBothDtypes) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const AttentionInputs inputs = MakeRandomInputs({1, 5, 2, 8}, dtype, 3);
    const std::string path = TempPath(absl::StrCat("rt_", DTypeName(dtype), ".npy"));
    ASSERT_TRUE(WriteTensorNpy(path, dtype, inputs.shape, inputs.q).ok());
    absl::StatusOr<NpyArray> raw = ReadNpyFile(path);
    ASSERT_TRUE(raw.ok());
    EXPECT_EQ(raw->descr, dtype == DType::kFloat16 ? "<f2" : "<V2");
    absl::StatusOr<NpyTensor> tensor = ReadTensorNpy(path, std::nullopt);
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    EXPECT_EQ(tensor->dtype, dtype);
    EXPECT_EQ(tensor->shape, inputs.shape);
    EXPECT_EQ(tensor->bytes, inputs.q);
    std::remove(path.c_str());
  }
}

TEST(NpyTest, ReadsTheBf16SpellingsOfPythonTools) {
  const std::string bits = std::string("\x80\x3f\x00\x40", 4);  // bf16 1.0, 2.0
  for (const char* descr : {"<V2", "|V2", "V2", "bfloat16"}) {
    const std::string path = TempPath("bf16.npy");
    WriteBytes(path, SerializeNpy(descr, {1, 1, 1, 2}, bits));
    absl::StatusOr<NpyTensor> tensor = ReadTensorNpy(path, DType::kBFloat16);
    ASSERT_TRUE(tensor.ok()) << descr << ": " << tensor.status();
    EXPECT_EQ(tensor->bytes, bits) << descr;
    std::remove(path.c_str());
  }
}

TEST(NpyTest, ConvertsFloatsAndByteSwaps) {
  const std::string path = TempPath("f4.npy");
  const float values[] = {1.0f, -2.5f, 3.0f, 0.1f};
  WriteBytes(path, SerializeNpy("<f4", {1, 2, 1, 2},
                                std::string(reinterpret_cast<const char*>(values), 16)));
  EXPECT_FALSE(ReadTensorNpy(path, std::nullopt).ok());  // float32 needs a target dtype
  absl::StatusOr<NpyTensor> tensor = ReadTensorNpy(path, DType::kBFloat16);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  ASSERT_EQ(tensor->bytes.size(), 8u);
  for (int i = 0; i < 4; ++i) {
    uint16_t bits;
    std::memcpy(&bits, tensor->bytes.data() + 2 * i, 2);
    EXPECT_EQ(bits, FloatToBf16Bits(values[i]));
  }
  // Big-endian fp16 1.0 is 3c 00.
  WriteBytes(path, SerializeNpy(">f2", {1, 1, 1, 1}, std::string("\x3c\x00", 2)));
  tensor = ReadTensorNpy(path, std::nullopt);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->bytes, std::string("\x00\x3c", 2));
  std::remove(path.c_str());
}

TEST(NpyTest, TensorErrorsNameTheFileAndTheProblem) {
  const std::string path = TempPath("bad.npy");
  WriteBytes(path, SerializeNpy("<f2", {4, 4}, std::string(32, '\0')));
  absl::StatusOr<NpyTensor> tensor = ReadTensorNpy(path, std::nullopt);
  EXPECT_EQ(tensor.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(tensor.status().message(), path));
  EXPECT_TRUE(absl::StrContains(tensor.status().message(), "not 4-D"));

  WriteBytes(path, SerializeNpy("<f2", {1, 1, 1, 1}, std::string(2, '\0')));
  tensor = ReadTensorNpy(path, DType::kBFloat16);
  EXPECT_TRUE(absl::StrContains(tensor.status().message(), "holds fp16")) << tensor.status();

  WriteBytes(path, SerializeNpy("<i4", {1, 1, 1, 1}, std::string(4, '\0')));
  EXPECT_FALSE(ReadTensorNpy(path, DType::kFloat16).ok());
  std::remove(path.c_str());
  // The reason, from errno, after the path.
  const absl::Status missing = ReadTensorNpy(path, std::nullopt).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.message(), "No such file or directory")) << missing;
  const absl::Status unwritable = WriteTensorNpy("/nonexistent-dir/o.npy", DType::kFloat16,
                                                 Shape{1, 1, 1, 1}, std::string(2, '\0'));
  EXPECT_EQ(unwritable.code(), absl::StatusCode::kNotFound) << unwritable;
  EXPECT_TRUE(absl::StrContains(unwritable.message(),
                                "cannot write '/nonexistent-dir/o.npy': No such file"))
      << unwritable;
}

}  // namespace
}  // namespace attn
