# One image for the API and the worker:
#   docker run IMAGE            → the API (migrates on start, then API_PROCESSES processes, one per
#                                 CPU of the container's quota by default, serve on $PORT)
#   docker run IMAGE worker     → the import worker
#   docker run IMAGE migrate    → apply migrations and exit
#   docker run IMAGE admin …    → the admin CLI
# Dependencies are installed with npm (the lockfile is npm's) on the Node image, then copied into the
# pinned Bun runtime image, which runs as its non-root `bun` user (uid 1000).
# With podman or buildah, build with --format docker: the OCI format has no HEALTHCHECK and they drop
# it with only a warning. scripts/container/check.sh builds and checks this image.

FROM node:20.19-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# npm install (which follows the lockfile) rather than npm ci: see README, "Quick start".
RUN npm install --omit=dev --ignore-scripts --no-audit --no-fund
# --ignore-scripts skips the postinstall script, which patches postgres.js (patches/*.patch: crash
# fixes the tests prove), and patch-package is a devDependency: run it here, the version package.json
# pins, so that the image carries the same patched files as every other install. --error-on-fail and
# --error-on-warn: a patch that does not apply, or a postgres.js version other than the patch's, fails
# the build. scripts/container/check.sh checks the patched files in the image.
COPY patches ./patches
RUN npx --yes "patch-package@$(node -p 'require("./package.json").devDependencies["patch-package"]')" \
      --error-on-fail --error-on-warn

FROM oven/bun:1.4.5-slim AS runtime
WORKDIR /app
ENV NODE_ENV=production PORT=3000 HOST=0.0.0.0 DATA_DIR=/data
# The code and its dependencies belong to root: the service can read but not rewrite what it runs.
# It writes only to $DATA_DIR: the upload secret, the worker's heartbeat and the local object store
# in /data/objects, made here so that a volume mounted there is writable by the service (Docker gives
# a new named volume the owner of the image's directory; without one it is root's).
COPY --from=deps /app/node_modules ./node_modules
COPY package.json tsconfig.json bunfig.toml ./
COPY src ./src
COPY worker ./worker
COPY sql ./sql
# a+rX: a checkout made under a strict umask (0600 files) would otherwise be unreadable to the service.
RUN chmod -R a+rX package.json tsconfig.json bunfig.toml src worker sql \
    && mkdir -p /data/objects && chown -R bun:bun /data
# Numeric, so that Kubernetes' runAsNonRoot can verify it (a name cannot be checked): the base
# image's `bun` user.
USER 1000:1000
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 CMD ["bun", "src/cli/healthcheck.ts"]
# `bun run` stays PID 1 and forwards SIGTERM and SIGINT to the service, which stops gracefully and
# exits 0. It is also why a signal that arrives before the service has installed its handlers (still
# connecting at start-up) ends it at once (143) instead of being ignored, as the kernel ignores an
# unhandled signal sent to PID 1, until the runtime's SIGKILL.
ENTRYPOINT ["bun", "run"]
CMD ["api"]
