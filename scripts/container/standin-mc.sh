#!/bin/sh
# The few `mc` commands compose.yaml runs, with curl: `mc ready ALIAS` (the server answers HTTP),
# `mc alias set ALIAS URL KEY SECRET`, `mc mb [--ignore-existing] ALIAS/BUCKET` (a SigV4-signed PUT).
set -eu
aliases=${HOME:-/root}/.mc-standin
url_of() {
  if [ -f "$aliases/$1" ]; then sed -n 1p "$aliases/$1"; elif [ "$1" = local ]; then echo http://127.0.0.1:9000; else
    echo "mc: unknown alias $1" >&2
    exit 1
  fi
}
case ${1:-} in
  ready)
    code=$(curl -s -o /dev/null -w '%{http_code}' "$(url_of "$2")/") || true
    [ "$code" != 000 ] || { echo "mc: $2 not ready" >&2; exit 1; }
    echo "The cluster '$2' is ready"
    ;;
  alias)
    if [ "${2:-}" != set ] || [ $# != 6 ]; then
      echo 'usage: mc alias set ALIAS URL KEY SECRET' >&2
      exit 2
    fi
    mkdir -p "$aliases"
    printf '%s\n%s\n%s\n' "$4" "$5" "$6" >"$aliases/$3"
    echo "Added \`$3\` successfully."
    ;;
  mb)
    shift
    ignore=0
    [ "$1" = --ignore-existing ] && { ignore=1; shift; }
    name=${1%%/*} bucket=${1#*/}
    url=$(url_of "$name")
    key=$(sed -n 2p "$aliases/$name") secret=$(sed -n 3p "$aliases/$name")
    code=$(curl -s -o /tmp/mb.out -w '%{http_code}' -X PUT --aws-sigv4 aws:amz:us-east-1:s3 --user "$key:$secret" \
      -H "x-amz-content-sha256: $(printf '' | sha256sum | cut -d' ' -f1)" "$url/$bucket")
    if [ "$code" = 200 ]; then echo "Bucket created successfully \`$1\`."; exit 0; fi
    if [ "$code" = 409 ] && [ $ignore = 1 ]; then echo "Bucket \`$1\` already exists."; exit 0; fi
    echo "mc: mb $1: HTTP $code $(cat /tmp/mb.out)" >&2
    exit 1
    ;;
  *)
    echo "mc stand-in: only ready, alias set, mb" >&2
    exit 2
    ;;
esac
