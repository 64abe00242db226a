#!/usr/bin/env bash
# Makes local stand-ins for the Dockerfile's FROM images, which no registry reachable from these
# machines serves, tagged with the exact names the Dockerfile uses so that it builds unchanged:
#   localhost/debian-min:bookworm            debootstrap --variant=minbase bookworm, imported
#   docker.io/library/node:<tag>             Debian's Node and npm (standin-node.Containerfile)
#   docker.io/oven/bun:<version>-slim        the npm package's bun binary (standin-bun.Containerfile)
# Idempotent: an image that already exists is kept (FORCE=1 rebuilds the two stand-ins).
# Needs root and: apt-get install -y podman buildah runc debootstrap
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
readonly here repo
readonly DEBIAN_MIN=localhost/debian-min:bookworm
readonly DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

say() { printf '[base-images] %s\n' "$*" >&2; }
# Temp dirs made below, removed on any exit.
tmpdirs=()
trap 'rm -rf "${tmpdirs[@]}"' EXIT
# scratch VAR PREFIX: a new temp dir in VAR (not via $(…), whose subshell would lose tmpdirs).
scratch() { local -n dir=$1; dir=$(mktemp -d "/tmp/$2.XXXXXX"); tmpdirs+=("$dir"); }
die() { say "FAIL: $*"; exit 1; }

image_exists() { podman image exists "$1"; }

# The FROM image of the Dockerfile whose name contains $1 (node:, oven/bun:), fully qualified the way
# podman stores a short name (docker.io/, and docker.io/library/ for a single-component name).
from_image() {
  local name
  name=$(awk -v want="$1" 'toupper($1) == "FROM" && index($2, want) { print $2; exit }' "$repo/Dockerfile")
  [[ -n $name ]] || die "no FROM image matching '$1' in $repo/Dockerfile"
  case $name in
    */*/*) ;;
    */*) name=docker.io/$name ;;
    *) name=docker.io/library/$name ;;
  esac
  printf '%s\n' "$name"
}

# What makes debian:bookworm-slim slim: dpkg leaves out docs, man pages and locales, now and in every
# later apt-get install, so that image sizes measured on the stand-ins come close to the real ones.
slim_down() {
  local root=$1
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$root"/usr/share/{man,groff,info,lintian,linda,locale}/*
}

# A minbase Debian root, the common parent of both stand-ins (what debian:bookworm-slim is for the
# real ones). The apt caches debootstrap leaves behind are dropped to keep the layer small.
make_debian_min() {
  if image_exists "$DEBIAN_MIN"; then say "$DEBIAN_MIN exists"; return; fi
  command -v debootstrap >/dev/null || die 'debootstrap missing: apt-get install -y podman buildah runc debootstrap'
  local root start=$SECONDS
  scratch root debian-min
  say "debootstrap --variant=minbase bookworm (about a minute)"
  debootstrap --variant=minbase bookworm "$root" "$DEBIAN_MIRROR" >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; rm -f "$root.log"; die 'debootstrap failed'; }
  rm -f "$root.log"
  # Security updates too, like the real debian image's sources.
  cat >"$root/etc/apt/sources.list" <<EOF
deb $DEBIAN_MIRROR bookworm main
deb $DEBIAN_MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  slim_down "$root"
  # An imported tarball has no config: give it the PATH and CMD of the real debian image, since the
  # stand-ins' ENV PATH="${PATH}:…" extends it.
  tar -C "$root" -c . | podman import \
    --change 'ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD=["bash"]' --quiet - "$DEBIAN_MIN" >/dev/null
  say "imported $DEBIAN_MIN ($((SECONDS - start))s)"
}

build_standin() {
  local image=$1 containerfile=$2 context=$3
  if image_exists "$image" && [[ ${FORCE:-0} != 1 ]]; then say "$image exists"; return; fi
  say "building $image from $containerfile"
  local start=$SECONDS previous
  previous=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null) || previous=
  buildah bud --isolation chroot --pull-never --layers=false -q -t "$image" -f "$here/$containerfile" "$context" \
    >/dev/null
  say "built $image in $((SECONDS - start))s"
  # A rebuilt stand-in leaves the old one untagged; it stays only while an image built on it exists.
  if [[ -n $previous ]]; then podman rmi "$previous" >/dev/null 2>&1 || true; fi
}

make_node() {
  local image context
  image=$(from_image 'node:')
  scratch context standin-node
  # The host's own CAs (a TLS-inspecting egress proxy's, here), for npm inside the build.
  mkdir "$context/extra-ca"
  find /usr/local/share/ca-certificates -maxdepth 1 -name '*.crt' -exec cp {} "$context/extra-ca/" \; \
    2>/dev/null || true
  build_standin "$image" standin-node.Containerfile "$context"
}

# The bun binary must be the version the Dockerfile pins: the npm package's binary is the same build
# the project's own `bun` runs (node_modules/bun/bin/bun.exe, from @oven/bun-linux-x64).
make_bun() {
  local image want binary have context
  image=$(from_image 'oven/bun:')
  want=${image##*:}
  want=${want%%-*}
  binary=$repo/node_modules/bun/bin/bun.exe
  [[ -x $binary ]] || die "$binary missing: run npm install in $repo first"
  have=$("$binary" --version)
  [[ $have == "$want" ]] || die "the Dockerfile pins bun $want but $binary is $have"
  scratch context standin-bun
  cp "$binary" "$context/bun"
  cp "$here/standin-bun-entrypoint.sh" "$context/"
  build_standin "$image" standin-bun.Containerfile "$context"
}

main() {
  [[ $(id -u) == 0 ]] || die 'run as root (rootful podman storage)'
  command -v buildah >/dev/null || die 'buildah missing: apt-get install -y podman buildah runc debootstrap'
  make_debian_min
  make_node
  make_bun
  podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' \
    | grep -E "debian-min|$(from_image 'node:')|$(from_image 'oven/bun:')" >&2 || true
}

main "$@"
