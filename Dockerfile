# One image for the API and the worker:
#   docker run IMAGE            → the API (migrates on start, serves on $PORT)
#   docker run IMAGE worker     → the import worker
#   docker run IMAGE migrate    → apply migrations and exit
#   docker run IMAGE admin …    → the admin CLI
# Dependencies are installed with npm (the lockfile is npm's) on the Node image, then copied into the
# pinned Bun runtime image, which runs as its non-root `bun` user.

FROM node:20.19-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# npm install (which follows the lockfile) rather than npm ci: see README, "Quick start".
RUN npm install --omit=dev --ignore-scripts --no-audit --no-fund

FROM oven/bun:1.4.5-slim AS runtime
WORKDIR /app
ENV NODE_ENV=production PORT=3000 HOST=0.0.0.0 DATA_DIR=/data
COPY --from=deps --chown=bun:bun /app/node_modules ./node_modules
COPY --chown=bun:bun package.json tsconfig.json bunfig.toml ./
COPY --chown=bun:bun src ./src
COPY --chown=bun:bun worker ./worker
COPY --chown=bun:bun sql ./sql
RUN mkdir -p /data && chown bun:bun /data
USER bun
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 CMD ["bun", "src/cli/healthcheck.ts"]
ENTRYPOINT ["bun", "run"]
CMD ["api"]
