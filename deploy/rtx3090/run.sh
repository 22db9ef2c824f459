#!/usr/bin/env bash
# Runs attnserve on this node (profile: node.env); see ../node/attnserve-node.sh.
#   run.sh start|stop|restart|status|health|info|logs [-f]|upgrade IMAGE|rollback
exec "$(dirname "${BASH_SOURCE[0]}")/../node/attnserve-node.sh" rtx3090 "${@:-start}"
