// Shared-memory regions through the client's C ABI (attn/client/c_api.h:
// attn_client_register_*_region, attn_client_attend_refs, ...) against the
// real attn_server on the CPU backend with --allow_shared_memory: tensors in
// a POSIX shared-memory object give the inline call's bytes, inline and
// referenced tensors mix, regions are listed and unregistered, closing the
// handle ends its lease, and mistakes are refused naming the field.
//
// Linked with the ABI's objects, as client_c_api_test is (see there).
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "attn/client/attention_client.h"
#include "attn/client/c_api.h"
#include "attn/client/shared_memory.h"
#include "attnserve/v1/attention.pb.h"
#include "breadth_cases.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "test_util.h"

namespace attn {
namespace {

using ::attn::testing::ServerProcess;

struct ClientCloser {
  void operator()(attn_client_t* client) const { attn_client_close(client); }
};
using ClientHandle = std::unique_ptr<attn_client_t, ClientCloser>;

ClientHandle Connect(const std::string& address) {
  attn_client_options_t options;
  attn_client_options_init(&options);
  options.address = address.c_str();
  attn_client_t* client = nullptr;
  char error[256] = "";
  EXPECT_EQ(attn_client_connect(&options, &client, error, sizeof(error)), 0) << error;
  return ClientHandle(client);
}

int DTypeToC(DType dtype) {
  return dtype == DType::kBFloat16 ? ATTN_DTYPE_BFLOAT16 : ATTN_DTYPE_FLOAT16;
}

// Where a call's tensors sit in one shared-memory object: each at a multiple
// of 64 bytes (the server wants multiples of 16).
struct Layout {
  int64_t q = 0, k = 0, v = 0, out = 0, lse = 0, bytes = 0;
};

Layout LayoutFor(const AttentionInputs& in) {
  auto next = [](int64_t end) { return (end + 63) / 64 * 64; };
  Layout l;
  l.k = next(l.q + in.QBytes());
  l.v = next(l.k + in.KvBytes());
  l.out = next(l.v + in.KvBytes());
  l.lse = next(l.out + in.QBytes());
  l.bytes = next(l.lse + in.LseElements() * 4);
  return l;
}

attn_client_tensor_ref_t Ref(const char* region_id, int64_t offset, int64_t byte_size) {
  return attn_client_tensor_ref_t{region_id, offset, byte_size};
}

attn_client_tensor_refs_t NoRefs() {
  attn_client_tensor_refs_t refs{};
  refs.struct_size = sizeof(refs);
  return refs;
}

// One attn_client_attend_refs call: the pointers are the caller's (NULL for a
// tensor given by reference), outputs given inline land in `out` / `lse`.
struct RefCall {
  int code = -1;
  std::string error;
  std::string out;
  std::vector<float> lse;
  attn_client_tensor_paths_t paths{};
};

RefCall AttendRefs(attn_client_t* client, const AttentionInputs& in, const AttendOptions& options,
                   const void* q, const void* k, const void* v, bool out_inline, bool lse_inline,
                   const attn_client_tensor_refs_t* refs, int transport = ATTN_TRANSPORT_AUTO) {
  RefCall call;
  if (out_inline) call.out.assign(static_cast<size_t>(in.QBytes()), '\xff');
  if (lse_inline) call.lse.assign(in.LseElements(), std::nanf(""));
  call.paths.struct_size = sizeof(call.paths);
  char error[512] = "";
  const bool varlen = in.varlen();
  call.code = attn_client_attend_refs(
      client, nullptr, DTypeToC(in.dtype), q, k, v, out_inline ? call.out.data() : nullptr,
      lse_inline ? call.lse.data() : nullptr, varlen ? in.cu_seqlens_q.data() : nullptr,
      varlen ? in.cu_seqlens_k.data() : nullptr, in.shape.batch, in.shape.seq_len, in.kv_seq_len,
      in.shape.num_heads, in.kv_num_heads, in.shape.head_dim, options.causal ? 1 : 0,
      options.window_left, options.window_right, 0.0f, in.TokensQ(), in.TokensKv(),
      /*timeout_s=*/0, transport, /*request_id=*/nullptr, refs, /*timing=*/nullptr, &call.paths,
      error, sizeof(error));
  call.error = call.code == 0 ? "" : error;
  return call;
}

// The region's id, or "" after a failed expectation.
std::string RegisterSystem(attn_client_t* client, const std::string& name,
                           const SharedMemory& shm) {
  char id[ATTN_CLIENT_REGION_ID_BYTES];
  char error[256] = "";
  const int code =
      attn_client_register_system_region(client, name.c_str(), shm.name().c_str(), 0, shm.size(),
                                         id, sizeof(id), error, sizeof(error));
  EXPECT_EQ(code, 0) << error;
  return code == 0 ? std::string(id) : std::string();
}

attnserve::v1::ListRegionsResponse ListRegions(attn_client_t* client) {
  attn_client_buffer_t message{};
  char error[256] = "";
  attnserve::v1::ListRegionsResponse regions;
  EXPECT_EQ(attn_client_list_regions(client, &message, error, sizeof(error)), 0) << error;
  EXPECT_TRUE(regions.ParseFromArray(message.data, static_cast<int>(message.size)));
  attn_client_buffer_free(&message);
  return regions;
}

int64_t RegionsOnServer(attn_client_t* client) {
  attn_client_buffer_t message{};
  char error[256] = "";
  attnserve::v1::ServerStats stats;
  EXPECT_EQ(attn_client_stats(client, &message, error, sizeof(error)), 0) << error;
  EXPECT_TRUE(stats.ParseFromArray(message.data, static_cast<int>(message.size)));
  attn_client_buffer_free(&message);
  return stats.regions();
}

class ClientCApiRegionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<ServerProcess>> started =
        ServerProcess::Start({"--backend=cpu", "--cpu_threads=1", "--allow_shared_memory"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client_ = Connect(server_->address());
    ASSERT_NE(client_, nullptr);
  }

  static inline std::unique_ptr<ServerProcess> server_;
  ClientHandle client_;
};

TEST_F(ClientCApiRegionsTest, TensorsInASystemRegionGiveTheInlineCallsBytes) {
  const uint64_t seed = attn::testing::FreshSeed();
  for (const attn::testing::BreadthCase& c : attn::testing::BreadthCases()) {
    SCOPED_TRACE(::testing::Message() << c.name << ", seed " << seed);
    const AttentionInputs in = MakeRandomInputs(c.geometry, seed);
    const RefCall inline_call = AttendRefs(client_.get(), in, c.options, in.q.data(), in.k.data(),
                                           in.v.data(), true, c.options.return_lse,
                                           /*refs=*/nullptr);
    ASSERT_EQ(inline_call.code, 0) << inline_call.error;

    const Layout at = LayoutFor(in);
    absl::StatusOr<std::unique_ptr<SharedMemory>> shm = SharedMemory::Create(at.bytes);
    ASSERT_TRUE(shm.ok()) << shm.status();
    char* base = (*shm)->data();
    std::memcpy(base + at.q, in.q.data(), in.q.size());
    std::memcpy(base + at.k, in.k.data(), in.k.size());
    std::memcpy(base + at.v, in.v.data(), in.v.size());
    std::memset(base + at.out, 0xff, static_cast<size_t>(at.bytes - at.out));  // NaN poison
    const std::string id = RegisterSystem(client_.get(), "io", **shm);
    ASSERT_FALSE(id.empty());

    attn_client_tensor_refs_t refs = NoRefs();
    refs.q = Ref(id.c_str(), at.q, in.QBytes());
    refs.k = Ref(id.c_str(), at.k, in.KvBytes());
    refs.v = Ref(id.c_str(), at.v, in.KvBytes());
    refs.out = Ref(id.c_str(), at.out, in.QBytes());
    if (c.options.return_lse) refs.lse = Ref(id.c_str(), at.lse, in.LseElements() * 4);
    const RefCall call =
        AttendRefs(client_.get(), in, c.options, nullptr, nullptr, nullptr, false, false, &refs);
    ASSERT_EQ(call.code, 0) << call.error;

    const std::string out(base + at.out, static_cast<size_t>(in.QBytes()));
    std::vector<float> lse(c.options.return_lse ? in.LseElements() : 0);
    std::memcpy(lse.data(), base + at.lse, lse.size() * sizeof(float));
    EXPECT_EQ(out, inline_call.out);  // the CPU backend is deterministic
    EXPECT_EQ(lse, inline_call.lse);
    attn::testing::ExpectMatchesReference(in, c.options, out, lse);
    for (int path : {call.paths.q, call.paths.k, call.paths.v, call.paths.out}) {
      EXPECT_EQ(path, ATTN_TENSOR_PATH_SYSTEM_SHM);
    }
    EXPECT_EQ(call.paths.lse,
              c.options.return_lse ? ATTN_TENSOR_PATH_SYSTEM_SHM : ATTN_TENSOR_PATH_UNSPECIFIED);
    EXPECT_EQ(inline_call.paths.q, ATTN_TENSOR_PATH_INLINE);
    EXPECT_EQ(inline_call.paths.out, ATTN_TENSOR_PATH_INLINE);

    char error[256] = "";
    EXPECT_EQ(attn_client_unregister_region(client_.get(), "io", error, sizeof(error)), 0) << error;
  }
}

TEST_F(ClientCApiRegionsTest, InlineAndReferencedTensorsMix) {
  AttendOptions options;
  options.causal = true;
  options.return_lse = true;
  const AttentionInputs in =
      MakeRandomInputs(Shape{1, 40, 2, 16}, DType::kFloat16, attn::testing::FreshSeed());
  const RefCall inline_call = AttendRefs(client_.get(), in, options, in.q.data(), in.k.data(),
                                         in.v.data(), true, true, nullptr);
  ASSERT_EQ(inline_call.code, 0) << inline_call.error;

  const Layout at = LayoutFor(in);
  absl::StatusOr<std::unique_ptr<SharedMemory>> shm = SharedMemory::Create(at.bytes);
  ASSERT_TRUE(shm.ok()) << shm.status();
  std::memcpy((*shm)->data() + at.q, in.q.data(), in.q.size());
  const std::string id = RegisterSystem(client_.get(), "mixed", **shm);
  attn_client_tensor_refs_t refs = NoRefs();
  refs.q = Ref(id.c_str(), at.q, in.QBytes());
  refs.lse = Ref(id.c_str(), at.lse, in.LseElements() * 4);
  const RefCall call = AttendRefs(client_.get(), in, options, nullptr, in.k.data(), in.v.data(),
                                  /*out_inline=*/true, /*lse_inline=*/false, &refs);
  ASSERT_EQ(call.code, 0) << call.error;
  EXPECT_EQ(call.out, inline_call.out);
  std::vector<float> lse(in.LseElements());
  std::memcpy(lse.data(), (*shm)->data() + at.lse, lse.size() * sizeof(float));
  EXPECT_EQ(lse, inline_call.lse);
  EXPECT_EQ(call.paths.q, ATTN_TENSOR_PATH_SYSTEM_SHM);
  EXPECT_EQ(call.paths.k, ATTN_TENSOR_PATH_INLINE);
  EXPECT_EQ(call.paths.v, ATTN_TENSOR_PATH_INLINE);
  EXPECT_EQ(call.paths.out, ATTN_TENSOR_PATH_INLINE);
  EXPECT_EQ(call.paths.lse, ATTN_TENSOR_PATH_SYSTEM_SHM);
  char error[256] = "";
  EXPECT_EQ(attn_client_unregister_region(client_.get(), "mixed", error, sizeof(error)), 0)
      << error;
}

TEST_F(ClientCApiRegionsTest, RegionsAreListedAndUnregistered) {
  absl::StatusOr<std::unique_ptr<SharedMemory>> a = SharedMemory::Create(4096);
  absl::StatusOr<std::unique_ptr<SharedMemory>> b = SharedMemory::Create(8192);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string id_a = RegisterSystem(client_.get(), "a", **a);
  const std::string id_b = RegisterSystem(client_.get(), "b", **b);
  ASSERT_FALSE(id_a.empty() || id_b.empty());
  EXPECT_NE(id_a, id_b);

  attnserve::v1::ListRegionsResponse listed = ListRegions(client_.get());
  ASSERT_EQ(listed.regions_size(), 2) << listed.ShortDebugString();
  for (const attnserve::v1::RegionInfo& region : listed.regions()) {
    const bool is_a = region.name() == "a";
    EXPECT_EQ(region.region_id(), is_a ? id_a : id_b);
    EXPECT_EQ(region.system().shm_name(), is_a ? (*a)->name() : (*b)->name());
    EXPECT_EQ(region.system().byte_size(), is_a ? 4096 : 8192);
  }

  char error[512] = "";
  char id[ATTN_CLIENT_REGION_ID_BYTES];
  EXPECT_EQ(attn_client_register_system_region(client_.get(), "a", (*b)->name().c_str(), 0, 4096,
                                               id, sizeof(id), error, sizeof(error)),
            6);  // ALREADY_EXISTS
  ASSERT_EQ(attn_client_unregister_region(client_.get(), "a", error, sizeof(error)), 0) << error;
  listed = ListRegions(client_.get());
  ASSERT_EQ(listed.regions_size(), 1);
  EXPECT_EQ(listed.regions(0).name(), "b");
  EXPECT_EQ(attn_client_unregister_region(client_.get(), "a", error, sizeof(error)), 5);

  // A reference to the unregistered region is refused by the server.
  const AttentionInputs in = MakeRandomInputs(Shape{1, 8, 1, 16}, DType::kBFloat16, 1);
  attn_client_tensor_refs_t refs = NoRefs();
  refs.q = Ref(id_a.c_str(), 0, in.QBytes());
  const RefCall call =
      AttendRefs(client_.get(), in, {}, nullptr, in.k.data(), in.v.data(), true, false, &refs);
  EXPECT_EQ(call.code, 5);  // NOT_FOUND
  EXPECT_TRUE(absl::StrContains(call.error, "q_ref.region_id")) << call.error;
  EXPECT_TRUE(absl::StrContains(call.error, server_->address())) << call.error;
  EXPECT_EQ(attn_client_unregister_region(client_.get(), "b", error, sizeof(error)), 0) << error;
}

// (Every test unregisters what it registered, so the server's count of
// regions is exact here.)
TEST_F(ClientCApiRegionsTest, ClosingTheHandleEndsItsLease) {
  const int64_t before = RegionsOnServer(client_.get());
  absl::StatusOr<std::unique_ptr<SharedMemory>> shm = SharedMemory::Create(4096);
  ASSERT_TRUE(shm.ok());
  ClientHandle holder = Connect(server_->address());
  const std::string id = RegisterSystem(holder.get(), "held", **shm);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(RegionsOnServer(client_.get()), before + 1);

  holder.reset();  // cancels the lease's HoldRegions call
  // The server ends the lease when it sees the cancellation, which is after
  // the client's side of the call has finished: wait for it, boundedly.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (RegionsOnServer(client_.get()) != before && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(RegionsOnServer(client_.get()), before);

  const AttentionInputs in = MakeRandomInputs(Shape{1, 8, 1, 16}, DType::kBFloat16, 1);
  attn_client_tensor_refs_t refs = NoRefs();
  refs.q = Ref(id.c_str(), 0, in.QBytes());
  const RefCall call =
      AttendRefs(client_.get(), in, {}, nullptr, in.k.data(), in.v.data(), true, false, &refs);
  EXPECT_EQ(call.code, 5) << call.error;
}

TEST_F(ClientCApiRegionsTest, MistakesAreRefusedNamingTheField) {
  const AttentionInputs in = MakeRandomInputs(Shape{1, 16, 2, 16}, DType::kFloat16, 5);
  const Layout at = LayoutFor(in);
  absl::StatusOr<std::unique_ptr<SharedMemory>> shm = SharedMemory::Create(at.bytes);
  ASSERT_TRUE(shm.ok());
  const std::string id = RegisterSystem(client_.get(), "m", **shm);
  ASSERT_FALSE(id.empty());
  struct Case {
    const char* what;
    attn_client_tensor_refs_t refs;
    bool q_inline, out_inline;
    int transport;
    int code;
    const char* message;
  };
  attn_client_tensor_refs_t q_ref = NoRefs();
  q_ref.q = Ref(id.c_str(), at.q, in.QBytes());
  attn_client_tensor_refs_t wrong_size = q_ref;
  wrong_size.q.byte_size = in.QBytes() - 2;
  attn_client_tensor_refs_t old_struct = q_ref;
  old_struct.struct_size = 0;
  attn_client_tensor_refs_t misaligned = q_ref;
  misaligned.q.offset = 8;
  attn_client_tensor_refs_t overlapping = q_ref;
  overlapping.out = Ref(id.c_str(), at.q + 64, in.QBytes());
  const Case cases[] = {
      // Refused by the library before anything is sent.
      {"inline and by reference", q_ref, true, true, ATTN_TRANSPORT_AUTO, 3,
       "q and refs->q are both set"},
      {"no output", NoRefs(), true, false, ATTN_TRANSPORT_AUTO, 3,
       "out is NULL and refs->out is unset"},
      {"wrong byte_size", wrong_size, false, true, ATTN_TRANSPORT_AUTO, 3, "q_ref.byte_size is"},
      {"struct_size 0", old_struct, false, true, ATTN_TRANSPORT_AUTO, 3, "refs->struct_size is 0"},
      {"streamed", q_ref, false, true, ATTN_TRANSPORT_STREAM, 3, "kStream"},
      // Refused by the server.
      {"misaligned", misaligned, false, true, ATTN_TRANSPORT_AUTO, 3,
       "q_ref.offset is 8; it must be >= 0 and a multiple of 16"},
      {"output over an input", overlapping, false, false, ATTN_TRANSPORT_AUTO, 3, "out_ref [64, "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const RefCall call =
        AttendRefs(client_.get(), in, {}, c.q_inline ? in.q.data() : nullptr, in.k.data(),
                   in.v.data(), c.out_inline, false, &c.refs, c.transport);
    EXPECT_EQ(call.code, c.code) << call.error;
    EXPECT_TRUE(absl::StrContains(call.error, c.message)) << call.error;
  }

  char error[512] = "";
  char small_id[8];
  EXPECT_EQ(
      attn_client_register_system_region(client_.get(), "small", (*shm)->name().c_str(), 0, 4096,
                                         small_id, sizeof(small_id), error, sizeof(error)),
      3);
  EXPECT_TRUE(absl::StrContains(error, "region_id must hold")) << error;
  // A CUDA region needs the CUDA backend: the handle reaches the server,
  // which says why it cannot take it.
  char id_out[ATTN_CLIENT_REGION_ID_BYTES];
  const unsigned char handle[ATTN_CLIENT_CUDA_IPC_HANDLE_BYTES] = {};
  EXPECT_EQ(attn_client_register_cuda_region(client_.get(), "gpu", handle, 0, 0, 1024, id_out,
                                             sizeof(id_out), error, sizeof(error)),
            9);  // FAILED_PRECONDITION
  EXPECT_TRUE(absl::StrContains(error, "cuda regions need the CUDA backend")) << error;
  EXPECT_EQ(ListRegions(client_.get()).regions_size(), 1);
  EXPECT_EQ(attn_client_unregister_region(client_.get(), "m", error, sizeof(error)), 0) << error;
}

TEST(ClientCApiRegionsOffTest, AServerWithoutTheFlagRefusesRegistrationSayingSo) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--backend=cpu", "--cpu_threads=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  ClientHandle client = Connect((*server)->address());
  absl::StatusOr<std::unique_ptr<SharedMemory>> shm = SharedMemory::Create(4096);
  ASSERT_TRUE(shm.ok());
  char id[ATTN_CLIENT_REGION_ID_BYTES];
  char error[512] = "";
  EXPECT_EQ(attn_client_register_system_region(client.get(), "x", (*shm)->name().c_str(), 0, 4096,
                                               id, sizeof(id), error, sizeof(error)),
            9);  // FAILED_PRECONDITION
  EXPECT_TRUE(absl::StrContains(error, "--allow_shared_memory")) << error;
}

}  // namespace
}  // namespace attn
