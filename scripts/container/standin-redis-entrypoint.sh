#!/bin/sh
# The real redis image's entrypoint: flags alone run redis-server, as the redis user. That image's
# redis-server is built with protected mode off (it is reached over the container network, not
# loopback); Debian's is not, so say it here.
set -e
if [ "${1#-}" != "$1" ]; then set -- redis-server "$@"; fi
if [ "$1" = redis-server ]; then
  shift
  set -- redis-server --protected-mode no "$@"
  if [ "$(id -u)" = 0 ]; then
    chown -R redis:redis /data
    exec setpriv --reuid redis --regid redis --init-groups "$@"
  fi
fi
exec "$@"
