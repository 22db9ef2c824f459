#!/usr/bin/env bash
# Installs attnserve's build and test dependencies from the distribution's
# packages (Debian 12 / Ubuntu 22.04+). The CUDA toolkit is not installed
# here: builds use the nvcc they find (PATH or /usr/local/cuda/bin), else
# build the CPU parts only.
#
#   install_deps.sh [--runtime-only | --build-only] [--with-checks] [--print-packages]
#     --runtime-only    only the shared libraries the binaries need at run time
#     --build-only      only what building the binaries needs: no GoogleTest,
#                       Python client packages or openssl (the image's build
#                       stage)
#     --with-checks     also the linters the deployment checks use, and clang-14
#                       for the sanitizer and fuzzing checks
#     --print-packages  print the package names, one a line, install nothing
set -euo pipefail

runtime_only=0
build_only=0
with_checks=0
print_only=0
for arg in "$@"; do
  case "$arg" in
    --runtime-only) runtime_only=1 ;;
    --build-only) build_only=1 ;;
    --with-checks) with_checks=1 ;;
    --print-packages) print_only=1 ;;
    *) echo "install_deps.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
# Package lists first: a fresh container has none, and the name check below
# needs them.
started=$SECONDS
if [ "$print_only" -eq 0 ]; then
  echo "install_deps.sh: updating the package lists (apt-get update)"
  "${sudo_cmd[@]}" apt-get update -qq
fi

if [ "$runtime_only" -eq 1 ]; then
  # libprometheus-cpp-pull1.0 (attn_server's /metrics) brings its core
  # library and civetweb; Debian 12 and Ubuntu 24.04 share its name.
  # libdnnl2: oneDNN, the CPU kernel's tile products (brings libgomp1).
  packages=(libgrpc++1.51 libprotobuf32 libprometheus-cpp-pull1.0 libdnnl2 ca-certificates)
  # Ubuntu 24.04 names them by newer sonames; let apt pick what exists.
  if ! apt-cache show libgrpc++1.51 >/dev/null 2>&1; then
    packages=(libgrpc++1.51t64 libprotobuf32t64 libprometheus-cpp-pull1.0 ca-certificates)
  fi
  if ! apt-cache show libdnnl2 >/dev/null 2>&1; then packages+=(libdnnl3); fi
else
  # ocl-icd-opencl-dev: Debian's oneDNN is built with its OpenCL GPU
  # runtime, so libdnnl-dev's CMake config requires OpenCL (only recommended
  # by libdnnl-dev; a CUDA toolkit happens to provide it, a plain Debian
  # base does not).
  # ccache: test.sh's builds and the container test's image build share one
  # compiler cache, so CI compiles each C++ file once (deploy/scripts/test.sh).
  packages=(build-essential cmake ninja-build pkg-config git ccache
            libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
            libabsl-dev nlohmann-json3-dev prometheus-cpp-dev libdnnl-dev ocl-icd-opencl-dev)
  if [ "$build_only" -eq 0 ]; then
    packages+=(libgtest-dev python3 python3-grpcio python3-numpy python3-protobuf
               python3-venv python3-pip python3-setuptools python3-wheel openssl)
  fi
fi
if [ "$with_checks" -eq 1 ]; then
  # deploy/checks: linters, patchelf for the bundle, docker-compose (1.x, for
  # `config` only), PyYAML for Debian's python3, and Node.js
  # with npm for the Kubernetes schema and Dockerfile checks (kept when the
  # machine already has a Node.js). prometheus: the server that scrapes
  # attn_server in server_prometheus_test. clang-14 with its sanitizer and
  # libFuzzer runtimes (libclang-rt-14-dev, only recommended by clang-14):
  # sanitizer_checks.sh's ASan/UBSan/TSan builds and fuzz targets.
  # The container test (deploy/container/test.sh): podman with runc (crun
  # refuses some hosts' cgroup layouts), catatonit for `podman run --init`,
  # the CNI plugins for its bridge network, podman-compose, and mmdebstrap for
  # a base image made of Debian packages (no registry needed).
  packages+=(shellcheck yamllint patchelf binutils python3-yaml docker-compose prometheus
             clang-14 libclang-rt-14-dev
             podman runc catatonit containernetworking-plugins podman-compose mmdebstrap)
  # kubectl renders the Kustomize overlays (deploy/checks/k8s.sh); any kubectl
  # there is kept (Debian's kubernetes-client would clash with another
  # package's /usr/bin/kubectl).
  if ! command -v kubectl >/dev/null 2>&1 && ! command -v kustomize >/dev/null 2>&1; then
    packages+=(kubernetes-client)
  fi
  if ! command -v node >/dev/null 2>&1; then
    packages+=(nodejs npm)
  elif ! command -v npm >/dev/null 2>&1; then
    packages+=(npm)
  fi
fi

if [ "$print_only" -eq 1 ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi
echo "install_deps.sh: [$((SECONDS - started)) s] installing ${#packages[@]} packages" \
     "(apt-get install; those present are kept)"
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "install_deps.sh: [$((SECONDS - started)) s] ${#packages[@]} packages installed"
