#!/usr/bin/env bash
# Makes local stand-ins for the images compose.yaml names besides the service's own, which no
# registry reachable from these machines serves, and prints the environment that points compose.yaml
# at them (compose-check.sh evals it):
#   POSTGRES_IMAGE=localhost/standin/postgres:15         Debian's postgresql-15 (standin-postgres.Containerfile)
#   REDIS_IMAGE=localhost/standin/redis:7                Debian's redis-server 7 (standin-redis.Containerfile)
#   S3_IMAGE=localhost/standin/minio:s3rver              s3rver as `minio server` (standin-minio.Containerfile)
#   PROXY_IMAGE=localhost/standin/nginx:1.27-alpine      Debian's nginx (standin-nginx.Containerfile)
# Their parents come from base-images.sh (the Debian minbase and Node stand-ins), run first.
# Idempotent: an image that already exists is kept (FORCE=1 rebuilds these four).
# Needs root and: apt-get install -y podman buildah runc debootstrap
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly here
say() { printf '[compose-images] %s\n' "$*" >&2; }

# build VAR IMAGE CONTAINERFILE FILE…: the image from the Containerfile, with the files as its context.
build() {
  local var=$1 image=$2 containerfile=$3
  shift 3
  if podman image exists "$image" && [[ ${FORCE:-0} != 1 ]]; then
    say "$image exists"
  else
    local context start=$SECONDS
    context=$(mktemp -d /tmp/compose-images.XXXXXX)
    (($# == 0)) || cp "${@/#/$here/}" "$context/"
    say "building $image from $containerfile"
    buildah bud --isolation chroot --pull-never --layers=false -q -t "$image" -f "$here/$containerfile" \
      "$context" >/dev/null || { rm -rf "$context"; say "FAIL: $image"; exit 1; }
    rm -rf "$context"
    say "built $image in $((SECONDS - start))s"
  fi
  printf '%s=%s\n' "$var" "$image"
}

main() {
  [[ $(id -u) == 0 ]] || { say 'run as root (rootful podman storage)'; exit 1; }
  bash "$here/base-images.sh" >&2
  build POSTGRES_IMAGE localhost/standin/postgres:15 standin-postgres.Containerfile standin-postgres-entrypoint.sh
  build REDIS_IMAGE localhost/standin/redis:7 standin-redis.Containerfile standin-redis-entrypoint.sh
  build S3_IMAGE localhost/standin/minio:s3rver standin-minio.Containerfile standin-minio-server.mjs standin-mc.sh \
    standin-minio-entrypoint.sh
  build PROXY_IMAGE localhost/standin/nginx:1.27-alpine standin-nginx.Containerfile
}

main "$@"
