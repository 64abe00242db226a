#!/bin/sh
# The real oven/bun image's entrypoint: a first argument that is a flag or no command runs bun.
set -e
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}" 2>/dev/null)" ]; then
  set -- /usr/local/bin/bun "$@"
fi
exec "$@"
