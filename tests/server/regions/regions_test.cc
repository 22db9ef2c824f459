// Shared-memory regions end to end (issue 12), against attn_server's CPU
// backend with --allow_shared_memory: system regions the test creates with
// attn::SharedMemory, referenced by Attend requests; every way a reference
// or a registration can be wrong; unregistering while a request uses the
// region; and a client that goes without unregistering. The server's
// mappings are read from /proc/<pid>/maps, so "unmapped" is observed, not
// assumed. CUDA regions need a GPU: tests/server/regions/cuda_regions_test.cc.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "attn/attention.h"
#include "attn/client/shared_memory.h"
#include "attnserve/v1/attention.grpc.pb.h"
#include "e2e_util.h"
#include "reliability_util.h"  // Eventually
#include "grpc/grpc.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "server_process.h"
#include "test_util.h"

namespace attn::testing {
namespace {

namespace pb = ::attnserve::v1;

// Whether process `pid` maps the shared-memory object `shm_name`.
bool Maps(pid_t pid, const std::string& shm_name) {
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  std::stringstream text;
  text << maps.rdbuf();
  return absl::StrContains(text.str(), absl::StrCat("/dev/shm", shm_name));
}

// A lease held open by a HoldRegions call, like a client's.
class Lease {
 public:
  explicit Lease(pb::Attention::Stub& stub) {
    reader_ = stub.HoldRegions(&context_, pb::HoldRegionsRequest());
    pb::HoldRegionsResponse response;
    if (reader_->Read(&response)) id_ = response.lease_id();
  }
  ~Lease() { End(); }
  const std::string& id() const { return id_; }
  // Ends the call as a client that exits does.
  void End() {
    if (reader_ == nullptr) return;
    context_.TryCancel();
    reader_->Finish();
    reader_.reset();
  }
  grpc::Status Finish() {
    grpc::Status status = reader_->Finish();
    reader_.reset();
    return status;
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<pb::HoldRegionsResponse>> reader_;
  std::string id_;
};

grpc::Status Register(pb::Attention::Stub& stub, const std::string& lease, const std::string& name,
                      const std::string& shm, int64_t offset, int64_t bytes,
                      pb::RegionInfo* info = nullptr) {
  pb::RegisterRegionRequest request;
  request.set_lease_id(lease);
  request.set_name(name);
  request.mutable_system()->set_shm_name(shm);
  request.mutable_system()->set_offset(offset);
  request.mutable_system()->set_byte_size(bytes);
  auto context = ContextWithDeadline(absl::Seconds(30));
  pb::RegisterRegionResponse response;
  grpc::Status status = stub.RegisterRegion(context.get(), request, &response);
  if (info != nullptr) *info = response.region();
  return status;
}

grpc::Status Unregister(pb::Attention::Stub& stub, const std::string& lease,
                        const std::string& name, absl::Duration timeout = absl::Seconds(30)) {
  pb::UnregisterRegionRequest request;
  request.set_lease_id(lease);
  request.set_name(name);
  auto context = ContextWithDeadline(timeout);
  pb::UnregisterRegionResponse response;
  return stub.UnregisterRegion(context.get(), request, &response);
}

std::vector<pb::RegionInfo> List(pb::Attention::Stub& stub, const std::string& lease,
                                 grpc::Status* status = nullptr) {
  pb::ListRegionsRequest request;
  request.set_lease_id(lease);
  auto context = ContextWithDeadline(absl::Seconds(30));
  pb::ListRegionsResponse response;
  grpc::Status s = stub.ListRegions(context.get(), request, &response);
  if (status != nullptr) *status = s;
  return {response.regions().begin(), response.regions().end()};
}

pb::ServerStats Stats(pb::Attention::Stub& stub) {
  auto context = ContextWithDeadline(absl::Seconds(30));
  pb::ServerStats stats;
  EXPECT_TRUE(stub.GetStats(context.get(), pb::GetStatsRequest(), &stats).ok());
  return stats;
}

void SetRef(pb::TensorRef* ref, const std::string& region_id, int64_t offset, int64_t bytes) {
  ref->set_region_id(region_id);
  ref->set_offset(offset);
  ref->set_byte_size(bytes);
}

// Bytes of a vector of 16-bit elements.
template <typename T>
int64_t Bytes(const std::vector<T>& v) {
  return static_cast<int64_t>(v.size() * sizeof(T));
}

class RegionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // gRPC's runtime stays up between tests: tearing it down after a
    // callback-API call waits seconds for its threads (as the client library
    // does, attention_client.cc KeepGrpcRuntimeUp).
    static const bool kept_up = (grpc_init(), true);
    static_cast<void>(kept_up);
    StartServer({"--backend=cpu", "--allow_shared_memory"});
  }

  void StartServer(std::vector<std::string> flags) {
    server_.reset();
    ServerProcess::Options options;
    options.flags = std::move(flags);
    auto server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = pb::Attention::NewStub(server_->NewChannel());
  }

  // A shared-memory object of `bytes`, created by the test.
  std::unique_ptr<SharedMemory> NewShm(int64_t bytes) {
    auto shm = SharedMemory::Create(bytes);
    EXPECT_TRUE(shm.ok()) << shm.status();
    return shm.ok() ? *std::move(shm) : nullptr;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<pb::Attention::Stub> stub_;
};

// Q, K, V in one region, O and the LSE in another: the result is right, it
// is in the region (not in the response), and the response says so.
TEST_F(RegionsTest, InputsAndOutputsInSystemRegions) {
  AttentionProblem problem = AttentionProblem::SelfAttention(2, 96, 4, 64);
  problem.causal = true;
  problem.heads_kv = 2;
  problem.return_lse = true;
  const ProblemInputs in = MakeProblemInputs(problem, DType::kBFloat16, FreshSeed());
  const int64_t q = Bytes(in.q), kv = Bytes(in.k), lse = problem.LseBytes();
  // Offsets deliberately not packed: each tensor at a multiple of 16 apart.
  const int64_t k_at = q + 16, v_at = k_at + kv + 48;
  auto inputs = NewShm(v_at + kv);
  auto outputs = NewShm(4096 + q + lse + 64);
  ASSERT_NE(inputs, nullptr);
  ASSERT_NE(outputs, nullptr);
  std::memcpy(inputs->data(), in.q.data(), q);
  std::memcpy(inputs->data() + k_at, in.k.data(), kv);
  std::memcpy(inputs->data() + v_at, in.v.data(), kv);
  std::memset(outputs->data(), 0, outputs->size());

  Lease lease(*stub_);
  ASSERT_FALSE(lease.id().empty());
  pb::RegionInfo in_region, out_region;
  ASSERT_TRUE(Register(*stub_, lease.id(), "in", inputs->name(), 0, inputs->size(), &in_region)
                  .ok());
  // A page-aligned offset into the object: the region starts there.
  ASSERT_TRUE(Register(*stub_, lease.id(), "out", outputs->name(), 4096, q + lse + 64,
                       &out_region)
                  .ok());
  EXPECT_EQ(in_region.name(), "in");
  EXPECT_EQ(in_region.region_id().size(), 32u);
  EXPECT_NE(in_region.region_id(), out_region.region_id());
  EXPECT_TRUE(Maps(server_->pid(), inputs->name()));

  pb::AttendRequest request = MakeRequest(in, "regions-1");
  request.clear_q();
  request.clear_k();
  request.clear_v();
  SetRef(request.mutable_q_ref(), in_region.region_id(), 0, q);
  SetRef(request.mutable_k_ref(), in_region.region_id(), k_at, kv);
  SetRef(request.mutable_v_ref(), in_region.region_id(), v_at, kv);
  SetRef(request.mutable_out_ref(), out_region.region_id(), 0, q);
  SetRef(request.mutable_lse_ref(), out_region.region_id(), q, lse);
  auto context = ContextWithDeadline(absl::Seconds(120));
  pb::AttendResponse response;
  const grpc::Status status = stub_->Attend(context.get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(response.out().empty());
  EXPECT_TRUE(response.lse().empty());
  for (pb::TensorPath path : {response.timing().q_path(), response.timing().k_path(),
                              response.timing().v_path(), response.timing().out_path(),
                              response.timing().lse_path()}) {
    EXPECT_EQ(path, pb::TENSOR_PATH_SYSTEM_SHM);
  }
  const std::string out(outputs->data() + 4096, static_cast<size_t>(q));
  const std::string lse_bytes(outputs->data() + 4096 + q, static_cast<size_t>(lse));
  EXPECT_TRUE(ProblemOutputMatchesReference(in, out, lse_bytes, 2e-2, 1e-3));
  // Nothing written past the outputs.
  for (int64_t i = 4096 + q + lse; i < outputs->size(); ++i) {
    ASSERT_EQ(outputs->data()[i], 0) << "byte " << i;
  }
  const pb::ServerStats stats = Stats(*stub_);
  EXPECT_EQ(stats.regions(), 2);
  EXPECT_EQ(stats.region_bytes_in(), q + 2 * kv);
  EXPECT_EQ(stats.region_bytes_out(), q + lse);
  EXPECT_EQ(stats.bytes_in(), 0);
  EXPECT_EQ(stats.bytes_out(), 0);
}

// Some tensors inline, some by reference, in the same request.
TEST_F(RegionsTest, InlineAndReferencedTensorsMix) {
  const ProblemInputs in = MakeProblemInputs(AttentionProblem::SelfAttention(1, 64, 2, 32),
                                             DType::kFloat16, FreshSeed());
  const int64_t kv = Bytes(in.k);
  auto shm = NewShm(kv);
  ASSERT_NE(shm, nullptr);
  std::memcpy(shm->data(), in.k.data(), kv);
  Lease lease(*stub_);
  pb::RegionInfo region;
  ASSERT_TRUE(Register(*stub_, lease.id(), "k", shm->name(), 0, kv, &region).ok());
  pb::AttendRequest request = MakeRequest(in, "mixed");
  request.clear_k();
  SetRef(request.mutable_k_ref(), region.region_id(), 0, kv);
  auto context = ContextWithDeadline(absl::Seconds(60));
  pb::AttendResponse response;
  ASSERT_TRUE(stub_->Attend(context.get(), request, &response).ok());
  EXPECT_EQ(response.timing().q_path(), pb::TENSOR_PATH_INLINE);
  EXPECT_EQ(response.timing().k_path(), pb::TENSOR_PATH_SYSTEM_SHM);
  EXPECT_EQ(response.timing().out_path(), pb::TENSOR_PATH_INLINE);
  EXPECT_TRUE(ProblemOutputMatchesReference(in, response.out(), "", 2e-2, 0));
}

// Every bad reference gets a clear status naming the field and the limit,
// and the server keeps serving.
TEST_F(RegionsTest, BadReferencesAreRefusedWithClearStatuses) {
  const ProblemInputs in = MakeProblemInputs(AttentionProblem::SelfAttention(1, 32, 2, 64),
                                             DType::kBFloat16, FreshSeed());
  const int64_t q = Bytes(in.q);
  auto shm = NewShm(3 * q);
  ASSERT_NE(shm, nullptr);
  Lease lease(*stub_);
  pb::RegionInfo region;
  ASSERT_TRUE(Register(*stub_, lease.id(), "r", shm->name(), 0, 3 * q, &region).ok());
  const std::string id = region.region_id();

  struct Case {
    const char* what;
    std::function<void(pb::AttendRequest*)> change;
    grpc::StatusCode code;
    std::vector<std::string> message_has;
  };
  const std::vector<Case> cases = {
      {"out of bounds",
       [&](pb::AttendRequest* r) { SetRef(r->mutable_out_ref(), id, 2 * q + 16, q); },
       grpc::StatusCode::INVALID_ARGUMENT, {"out_ref", "out of bounds", "'r'", "bytes"}},
      {"too small", [&](pb::AttendRequest* r) { SetRef(r->mutable_out_ref(), id, 0, q - 2); },
       grpc::StatusCode::INVALID_ARGUMENT, {"out_ref.byte_size", absl::StrCat(q)}},
      {"misaligned", [&](pb::AttendRequest* r) { SetRef(r->mutable_out_ref(), id, 8, q); },
       grpc::StatusCode::INVALID_ARGUMENT, {"out_ref.offset", "multiple of 16"}},
      {"negative offset", [&](pb::AttendRequest* r) { SetRef(r->mutable_out_ref(), id, -16, q); },
       grpc::StatusCode::INVALID_ARGUMENT, {"out_ref.offset"}},
      {"unknown region",
       [&](pb::AttendRequest* r) {
         SetRef(r->mutable_out_ref(), "0123456789abcdef0123456789abcdef", 0, q);
       },
       grpc::StatusCode::NOT_FOUND, {"out_ref.region_id", "not a registered region"}},
      {"inline and reference",
       [&](pb::AttendRequest* r) { SetRef(r->mutable_q_ref(), id, 0, q); },
       grpc::StatusCode::INVALID_ARGUMENT, {"q and q_ref are both set"}},
      {"output overlaps an input",
       [&](pb::AttendRequest* r) {
         r->clear_q();
         SetRef(r->mutable_q_ref(), id, 0, q);
         SetRef(r->mutable_out_ref(), id, q - 16, q);
       },
       grpc::StatusCode::INVALID_ARGUMENT, {"out_ref", "overlaps q_ref"}},
      {"lse_ref without return_lse",
       [&](pb::AttendRequest* r) { SetRef(r->mutable_lse_ref(), id, 0, 256); },
       grpc::StatusCode::INVALID_ARGUMENT, {"lse_ref", "return_lse"}},
  };
  for (const Case& c : cases) {
    pb::AttendRequest request = MakeRequest(in, c.what);
    c.change(&request);
    auto context = ContextWithDeadline(absl::Seconds(60));
    pb::AttendResponse response;
    const grpc::Status status = stub_->Attend(context.get(), request, &response);
    EXPECT_EQ(status.error_code(), c.code) << c.what << ": " << status.error_message();
    for (const std::string& part : c.message_has) {
      EXPECT_TRUE(absl::StrContains(status.error_message(), part))
          << c.what << ": '" << status.error_message() << "' lacks '" << part << "'";
    }
  }
  // Still serving, and the region is still usable.
  pb::AttendRequest good = MakeRequest(in, "good");
  SetRef(good.mutable_out_ref(), id, q, q);
  auto context = ContextWithDeadline(absl::Seconds(60));
  pb::AttendResponse response;
  ASSERT_TRUE(stub_->Attend(context.get(), good, &response).ok());
  EXPECT_TRUE(ProblemOutputMatchesReference(
      in, std::string(shm->data() + q, static_cast<size_t>(q)), "", 2e-2, 0));
}

// Registrations that cannot be honoured, and another lease's regions.
TEST_F(RegionsTest, BadRegistrationsAndForeignLeases) {
  auto shm = NewShm(8192);
  ASSERT_NE(shm, nullptr);
  Lease lease(*stub_);
  const std::string l = lease.id();
  EXPECT_EQ(Register(*stub_, l, "a", "/attn-no-such-object-x", 0, 4096).error_code(),
            grpc::StatusCode::NOT_FOUND);
  const grpc::Status past = Register(*stub_, l, "a", shm->name(), 4096, 8192);
  EXPECT_EQ(past.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(past.error_message(), "past the end")) << past.error_message();
  EXPECT_EQ(Register(*stub_, l, "a", shm->name(), 100, 1000).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // offset not page-aligned
  EXPECT_EQ(Register(*stub_, l, "a", "no-slash", 0, 100).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Register(*stub_, l, "", shm->name(), 0, 100).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Register(*stub_, "not-a-lease", "a", shm->name(), 0, 100).error_code(),
            grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Register(*stub_, l, "a", shm->name(), 0, 8192).ok());
  EXPECT_EQ(Register(*stub_, l, "a", shm->name(), 0, 8192).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);

  // Another client's lease sees none of them and cannot unregister them.
  Lease other(*stub_);
  ASSERT_FALSE(other.id().empty());
  EXPECT_NE(other.id(), l);
  EXPECT_TRUE(List(*stub_, other.id()).empty());
  EXPECT_EQ(Unregister(*stub_, other.id(), "a").error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_EQ(List(*stub_, l).size(), 1u);
  EXPECT_TRUE(Unregister(*stub_, l, "a").ok());
  EXPECT_TRUE(List(*stub_, l).empty());
  EXPECT_EQ(Unregister(*stub_, l, "a").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Eventually([&] { return !Maps(server_->pid(), shm->name()); }));
}

TEST_F(RegionsTest, OffByDefault) {
  StartServer({"--backend=cpu"});
  grpc::ClientContext context;
  auto reader = stub_->HoldRegions(&context, pb::HoldRegionsRequest());
  pb::HoldRegionsResponse response;
  EXPECT_FALSE(reader->Read(&response));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "--allow_shared_memory"));
  // A request that references a region says the same.
  const ProblemInputs in = MakeProblemInputs(AttentionProblem::SelfAttention(1, 16, 1, 32),
                                             DType::kBFloat16, FreshSeed());
  pb::AttendRequest request = MakeRequest(in, "off");
  SetRef(request.mutable_out_ref(), "0123456789abcdef0123456789abcdef", 0, Bytes(in.q));
  auto ctx = ContextWithDeadline(absl::Seconds(30));
  pb::AttendResponse out;
  const grpc::Status refused = stub_->Attend(ctx.get(), request, &out);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// A request that runs for a while (one CPU thread of cpu_reference,
// 1x2048x8x128, cancelled
// by the test) keeps its region mapped: unregistering takes the region away
// from new requests at once, waits for the running one, and the server
// unmaps it only when that one has ended.
TEST_F(RegionsTest, UnregisterWhileInUseWaitsAndNeverUnmapsUnderARequest) {
  StartServer({"--backend=cpu", "--allow_shared_memory", "--cpu_threads=1"});
  const ProblemInputs in = MakeProblemInputs(AttentionProblem::SelfAttention(1, 2048, 8, 128),
                                             DType::kBFloat16, FreshSeed());
  const int64_t q = Bytes(in.q);
  auto shm = NewShm(2 * q);
  ASSERT_NE(shm, nullptr);
  Lease lease(*stub_);
  pb::RegionInfo region;
  ASSERT_TRUE(Register(*stub_, lease.id(), "busy", shm->name(), 0, 2 * q, &region).ok());
  std::memcpy(shm->data(), in.q.data(), q);

  pb::AttendRequest request = MakeRequest(in, "long");
  request.set_kernel(kCpuKernelName);
  request.clear_q();
  SetRef(request.mutable_q_ref(), region.region_id(), 0, q);
  SetRef(request.mutable_out_ref(), region.region_id(), q, q);
  grpc::ClientContext long_call;
  long_call.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
  pb::AttendResponse long_response;
  grpc::Status long_status;
  absl::Notification long_done;
  stub_->async()->Attend(&long_call, &request, &long_response, [&](grpc::Status s) {
    long_status = std::move(s);
    long_done.Notify();
  });
  ASSERT_TRUE(Eventually([&] {
    const auto regions = List(*stub_, lease.id());
    return regions.size() == 1 && regions[0].requests_using() == 1;
  }));

  // Unregister with a short deadline: the region leaves the registry, the
  // call says the server unmaps it later.
  const grpc::Status early = Unregister(*stub_, lease.id(), "busy", absl::Milliseconds(300));
  EXPECT_EQ(early.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << early.error_message();
  EXPECT_TRUE(List(*stub_, lease.id()).empty());
  pb::AttendRequest again = MakeRequest(in, "again");
  SetRef(again.mutable_out_ref(), region.region_id(), q, q);
  auto ctx = ContextWithDeadline(absl::Seconds(30));
  pb::AttendResponse refused;
  EXPECT_EQ(stub_->Attend(ctx.get(), again, &refused).error_code(), grpc::StatusCode::NOT_FOUND);
  // The running request still has its memory.
  EXPECT_FALSE(long_done.HasBeenNotified());
  EXPECT_TRUE(Maps(server_->pid(), shm->name()));

  long_call.TryCancel();
  ASSERT_TRUE(long_done.WaitForNotificationWithTimeout(absl::Seconds(120)));
  EXPECT_EQ(long_status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(Eventually([&] { return !Maps(server_->pid(), shm->name()); }));
  EXPECT_EQ(Stats(*stub_).regions(), 0);
}

// An unregister with time to wait returns OK once the request using the
// region has ended.
TEST_F(RegionsTest, UnregisterReturnsWhenTheLastRequestEnds) {
  StartServer({"--backend=cpu", "--allow_shared_memory", "--cpu_threads=1"});
  const ProblemInputs in = MakeProblemInputs(AttentionProblem::SelfAttention(1, 2048, 8, 128),
                                             DType::kBFloat16, FreshSeed());
  const int64_t q = Bytes(in.q);
  auto shm = NewShm(q);
  ASSERT_NE(shm, nullptr);
  Lease lease(*stub_);
  pb::RegionInfo region;
  ASSERT_TRUE(Register(*stub_, lease.id(), "out", shm->name(), 0, q, &region).ok());
  pb::AttendRequest request = MakeRequest(in, "long");
  request.set_kernel(kCpuKernelName);  // the simple kernel: seconds on one thread
  SetRef(request.mutable_out_ref(), region.region_id(), 0, q);
  grpc::ClientContext long_call;
  pb::AttendResponse long_response;
  absl::Notification long_done;
  stub_->async()->Attend(&long_call, &request, &long_response,
                         [&](grpc::Status) { long_done.Notify(); });
  ASSERT_TRUE(Eventually([&] {
    const auto regions = List(*stub_, lease.id());
    return regions.size() == 1 && regions[0].requests_using() == 1;
  }));
  grpc::Status unregistered;
  absl::Notification unregister_done;
  std::thread unregister([&] {
    unregistered = Unregister(*stub_, lease.id(), "out", absl::Seconds(120));
    unregister_done.Notify();
  });
  // It waits for the request...
  EXPECT_FALSE(unregister_done.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  long_call.TryCancel();
  ASSERT_TRUE(long_done.WaitForNotificationWithTimeout(absl::Seconds(120)));
  unregister.join();
  // ...and answers OK once it has ended.
  EXPECT_TRUE(unregistered.ok()) << unregistered.error_message();
  EXPECT_TRUE(Eventually([&] { return !Maps(server_->pid(), shm->name()); }));
}

// A client that shrinks its object under a registered region gets a clear
// status for requests that use it; the server never touches the lost pages
// (which would be SIGBUS) and keeps serving.
TEST_F(RegionsTest, ShrunkObjectIsRefusedAndTheServerLives) {
  const ProblemInputs in = MakeProblemInputs(AttentionProblem::SelfAttention(1, 64, 2, 64),
                                             DType::kBFloat16, FreshSeed());
  const int64_t q = Bytes(in.q);
  auto shm = NewShm(2 * q);
  ASSERT_NE(shm, nullptr);
  Lease lease(*stub_);
  pb::RegionInfo region;
  ASSERT_TRUE(Register(*stub_, lease.id(), "s", shm->name(), 0, 2 * q, &region).ok());
  const int fd = shm_open(shm->name().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
  pb::AttendRequest request = MakeRequest(in, "shrunk");
  SetRef(request.mutable_out_ref(), region.region_id(), q, q);
  auto context = ContextWithDeadline(absl::Seconds(60));
  pb::AttendResponse response;
  const grpc::Status status = stub_->Attend(context.get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "shrank")) << status.error_message();
  auto health = server_->Health();
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);
}

// A client that goes without unregistering: when its lease call ends, the
// server unregisters and unmaps its regions.
TEST_F(RegionsTest, ClientThatGoesLeavesNothingBehind) {
  auto a = NewShm(4096);
  auto b = NewShm(4096);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  {
    // Its own connection, dropped with the client.
    auto channel = server_->NewChannel();
    auto stub = pb::Attention::NewStub(channel);
    auto lease = std::make_unique<Lease>(*stub);
    ASSERT_TRUE(Register(*stub, lease->id(), "a", a->name(), 0, 4096).ok());
    ASSERT_TRUE(Register(*stub, lease->id(), "b", b->name(), 0, 4096).ok());
    EXPECT_EQ(Stats(*stub_).regions(), 2);
    EXPECT_TRUE(Maps(server_->pid(), a->name()));
    lease->End();
  }
  EXPECT_TRUE(Eventually([&] { return Stats(*stub_).regions() == 0; }));
  EXPECT_TRUE(Eventually(
      [&] { return !Maps(server_->pid(), a->name()) && !Maps(server_->pid(), b->name()); }));
}

// The unix-domain socket listener serves regions too (a same-host peer).
TEST_F(RegionsTest, UnixSocketClientsMayUseRegions) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/attn-", getpid(), ".sock");
  StartServer({"--backend=cpu", "--allow_shared_memory", "--listen_unix=" + path});
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel =
      grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
  auto stub = pb::Attention::NewStub(channel);
  const ProblemInputs in = MakeProblemInputs(AttentionProblem::SelfAttention(1, 32, 2, 64),
                                             DType::kBFloat16, FreshSeed());
  const int64_t q = Bytes(in.q);
  auto shm = NewShm(q);
  ASSERT_NE(shm, nullptr);
  Lease lease(*stub);
  ASSERT_FALSE(lease.id().empty());
  pb::RegionInfo region;
  ASSERT_TRUE(Register(*stub, lease.id(), "o", shm->name(), 0, q, &region).ok());
  pb::AttendRequest request = MakeRequest(in, "unix");
  SetRef(request.mutable_out_ref(), region.region_id(), 0, q);
  auto context = ContextWithDeadline(absl::Seconds(60));
  pb::AttendResponse response;
  const grpc::Status status = stub->Attend(context.get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(ProblemOutputMatchesReference(
      in, std::string(shm->data(), static_cast<size_t>(q)), "", 2e-2, 0));
}

}  // namespace
}  // namespace attn::testing
