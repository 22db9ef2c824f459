#!/usr/bin/env bash
# Builds the attnserve image for this node's GPU (profile: node.env).
#   build.sh [IMAGE]      default IMAGE: ATTN_IMAGE of node.env
exec "$(dirname "${BASH_SOURCE[0]}")/../node/attnserve-node.sh" rtx3090 build "$@"
