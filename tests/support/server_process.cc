#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

#ifndef ATTN_SERVER_BINARY
#error "ATTN_SERVER_BINARY must name the attn_server binary (set by CMake)"
#endif

namespace attn::testing {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(10);

std::string TempRoot() {
  const char* dir = std::getenv("TMPDIR");
  return (dir != nullptr && *dir != '\0') ? dir : "/tmp";
}

// The port in `path` once the file holds a whole line ("<port>\n").
std::optional<int> ReadPortFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::stringstream text;
  text << file.rdbuf();
  const std::string content = text.str();
  if (content.empty() || content.back() != '\n') return std::nullopt;
  int port = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(content), &port) || port <= 0) {
    return std::nullopt;
  }
  return port;
}

ServerExit DecodeWaitStatus(int status) {
  ServerExit result;
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace

std::string ServerExit::ToString() const {
  if (exited) return absl::StrCat("exit code ", exit_code);
  return absl::StrCat("killed by signal ", term_signal, " (", strsignal(term_signal), ")");
}

std::string ServerProcess::BinaryPath() {
  const char* override_path = std::getenv("ATTN_SERVER_BINARY");
  if (override_path != nullptr && *override_path != '\0') return override_path;
  return ATTN_SERVER_BINARY;
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    std::vector<std::string> flags) {
  Options options;
  options.flags = std::move(flags);
  return Start(std::move(options));
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(Options options) {
  std::unique_ptr<ServerProcess> process(new ServerProcess());
  process->options_ = std::move(options);

  std::string dir_template = TempRoot() + "/attn_server.XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp(", dir_template, "): ", std::strerror(errno)));
  }
  process->temp_dir_ = dir_template;
  process->port_file_ = process->temp_dir_ + "/port";

  // Everything the child needs is built before fork(): between fork and exec
  // only async-signal-safe calls are allowed in a multi-threaded parent.
  std::vector<std::string> args = {BinaryPath(),
                                   "--listen=" + process->options_.listen_host + ":0",
                                   "--port_file=" + process->port_file_};
  args.insert(args.end(), process->options_.flags.begin(), process->options_.flags.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  const pid_t parent = getpid();
  struct rlimit open_files {};
  open_files.rlim_cur = open_files.rlim_max = static_cast<rlim_t>(process->options_.max_open_files);
  int log_fd = -1;
  if (!process->options_.log_path.empty()) {
    log_fd = open(process->options_.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                  0644);
    if (log_fd < 0) {
      return absl::InternalError(
          absl::StrCat("open(", process->options_.log_path, "): ", std::strerror(errno)));
    }
  }

  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // Die with the test rather than linger on a port.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigprocmask(SIG_SETMASK, &empty_mask, nullptr);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    if (log_fd >= 0) dup2(log_fd, STDERR_FILENO);  // dup2 clears O_CLOEXEC on the copy
    if (open_files.rlim_max > 0 && setrlimit(RLIMIT_NOFILE, &open_files) != 0) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);  // exec failed
  }
  process->pid_ = pid;
  if (log_fd >= 0) close(log_fd);

  const std::string command = absl::StrJoin(args, " ");
  const absl::Time deadline = absl::Now() + process->options_.start_timeout;
  while (true) {
    if (process->Reap()) {
      return absl::AbortedError(absl::StrCat("attn_server exited during start-up (",
                                             process->exit_->ToString(), "): ", command));
    }
    if (process->port_ == 0) {
      if (std::optional<int> port = ReadPortFile(process->port_file_)) {
        process->port_ = *port;
        process->address_ = absl::StrCat("127.0.0.1:", *port);
      }
    }
    if (process->port_ != 0) {
      auto status = process->Health();
      if (status.ok() && *status == grpc::health::v1::HealthCheckResponse::SERVING) break;
    }
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      (void)process->Wait(absl::Seconds(10));
      return absl::DeadlineExceededError(
          absl::StrCat("attn_server did not report SERVING within ",
                       absl::FormatDuration(process->options_.start_timeout), ": ", command));
    }
    absl::SleepFor(kPollInterval);
  }
  return process;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exit_.has_value()) {
    if (!Stop().ok()) {
      kill(pid_, SIGKILL);
      (void)Wait(absl::Seconds(10));
    }
  }
  if (!port_file_.empty()) std::remove(port_file_.c_str());
  if (!temp_dir_.empty()) rmdir(temp_dir_.c_str());
}

std::shared_ptr<grpc::Channel> ServerProcess::NewChannel() const {
  return NewChannel(options_.credentials != nullptr ? options_.credentials
                                                    : grpc::InsecureChannelCredentials());
}

std::shared_ptr<grpc::Channel> ServerProcess::NewChannel(
    std::shared_ptr<grpc::ChannelCredentials> credentials) const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(1 << 30);
  args.SetMaxSendMessageSize(1 << 30);
  // A fresh connection per channel, so tests do not share subchannels.
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel(address_, credentials, args);
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> ServerProcess::Health(
    const std::string& service) const {
  auto stub = grpc::health::v1::Health::NewStub(NewChannel());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        "health check: " + status.error_message());
  }
  return response.status();
}

absl::Status ServerProcess::Signal(int signal_number) {
  if (pid_ <= 0 || Reap()) {
    return absl::FailedPreconditionError("attn_server is not running");
  }
  if (kill(pid_, signal_number) != 0) {
    return absl::InternalError(absl::StrCat("kill: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

bool ServerProcess::Reap() {
  if (exit_.has_value()) return true;
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t result = waitpid(pid_, &status, WNOHANG);
  if (result == pid_) {
    exit_ = DecodeWaitStatus(status);
    return true;
  }
  return false;
}

absl::StatusOr<ServerExit> ServerProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!Reap()) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "attn_server (pid ", pid_, ") still running after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(kPollInterval);
  }
  return *exit_;
}

absl::StatusOr<ServerExit> ServerProcess::Stop() {
  if (!Reap()) {
    if (absl::Status sent = Signal(SIGTERM); !sent.ok() && !Reap()) return sent;
  }
  return Wait(options_.stop_timeout);
}

}  // namespace attn::testing
