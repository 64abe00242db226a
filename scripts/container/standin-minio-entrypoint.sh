#!/bin/sh
# The real minio image's entrypoint: arguments that are not a command of their own run minio.
set -e
if [ "$1" != minio ] && [ -n "$1" ] && [ -z "$(command -v "$1" 2>/dev/null)" ]; then set -- minio "$@"; fi
exec "$@"
