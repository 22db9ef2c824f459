# shellcheck shell=sh
# Sourced (POSIX sh, so the Dockerfile's RUN can too), with CCACHE_DIR set:
#   CCACHE_DIR=DIR; . deploy/scripts/ccache_env.sh
# The environment every ccache build of attnserve shares, so builds in
# other trees and in containers hit each other's objects (test.sh's build,
# the quickstart test's demo.sh build, the container test's image build):
#   CCACHE_COMPILERCHECK=content  a container's g++ of the same package has
#                                 another mtime than the host's
#   LANG=C.UTF-8, no LC_* set     ccache hashes LANG, LC_ALL, LC_CTYPE and
#                                 LC_MESSAGES (the compiler's messages): with
#                                 another locale the image build missed
#                                 every file
# Each build still sets its own CCACHE_BASEDIR (its source root: paths
# become relative to the build directory, so trees in other places match)
# and CMAKE_CXX_COMPILER_LAUNCHER=ccache for its own configure only.
export CCACHE_DIR="${CCACHE_DIR:?set CCACHE_DIR before sourcing ccache_env.sh}"
export CCACHE_COMPILERCHECK=content LANG=C.UTF-8
unset LC_ALL LC_CTYPE LC_MESSAGES
