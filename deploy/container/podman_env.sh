#!/usr/bin/env bash
# podman's settings for this kind of host (sourced, not run): writes a
# containers.conf into the given folder and exports CONTAINERS_CONF.
#
#   . deploy/container/podman_env.sh DIR
#
# Why each setting (found on the CI sandbox: root, no CAP_SYS_RESOURCE, a
# hard nofile limit of 20000, a hybrid cgroup layout):
#   default_ulimits  podman's defaults (nofile 1048576) exceed what an
#                    unprivileged-resource root may set; use the host's hard
#                    limits (nproc no higher than kernel.pid_max);
#   runtime runc     crun refuses the hybrid cgroup layout;
#   cgroupfs, file   no systemd to manage cgroups or take events.
# A host with a full systemd and podman's defaults working needs none of
# this, and none of it hurts there.

podman_env_dir="${1:?podman_env.sh DIR}"
mkdir -p "$podman_env_dir"
podman_nofile="$(ulimit -Hn)"
podman_nproc="$(ulimit -Hu)"
podman_pid_max="$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 32768)"
if [ "$podman_nofile" = unlimited ]; then podman_nofile=1048576; fi
if [ "$podman_nproc" = unlimited ] || [ "$podman_nproc" -gt "$podman_pid_max" ]; then
  podman_nproc="$podman_pid_max"
fi
cat >"$podman_env_dir/containers.conf" <<EOF
# Written by deploy/container/podman_env.sh for this host.
[containers]
default_ulimits = ["nofile=$podman_nofile:$podman_nofile", "nproc=$podman_nproc:$podman_nproc"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF="$podman_env_dir/containers.conf"
