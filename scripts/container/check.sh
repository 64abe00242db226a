#!/usr/bin/env bash
# SC2015: pass never fails, so `cond && pass … || fail …` is an if/else here.
# SC2016: the single-quoted $… are for the container's shell and bun.
# shellcheck disable=SC2015,SC2016
# Builds the container image from the project's Dockerfile and proves it works, with podman and
# buildah from Debian (no Docker engine or registry needed; ../shared/containers.md):
#   build (stand-in base images first, base-images.sh) · image size · postgres.js patched as patches/
#   says · `migrate` · API and worker containers against a PostgreSQL and Redis of its own · /healthz,
#   /readyz · HEALTHCHECK healthy for both · a CSV import end to end through the HTTP API · non-root
#   user · SIGTERM stops each container with exit code 0.
# Prints PASS/FAIL lines and the exact commands it runs;
# exits non-zero on any FAIL. Removes what it started, also on failure or Ctrl-C (the image stays: it
# is the product). Run as root:  bash scripts/container/check.sh
# Environment: IMAGE (default localhost/contact-service:check), KEEP=1 keeps the temp dir and logs.
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
readonly here repo
readonly IMAGE=${IMAGE:-localhost/contact-service:check}
readonly RUN=cs-check-$$ # prefix of every container and volume this run makes
readonly API=$RUN-api WORKER=$RUN-worker VOLUME=$RUN-objects

work= # the temp dir of this run: PostgreSQL and Redis data, logs, the CSV
failures=0
pg_started=0
redis_started=0

# Notes go to the script's stderr (fd 4, see main) so that they show even from a function whose
# stdout is data (admin) or whose output is redirected (healthcheck run).
say() { printf '[check] %s\n' "$*" >&4; }
pass() { printf 'PASS %s\n' "$*"; }
fail() {
  printf 'FAIL %s\n' "$*"
  failures=$((failures + 1))
}
# A failure after which nothing further can be checked.
fatal() {
  fail "$*"
  exit 1
}

# podman as containers.md says works on these machines: crun fails (setrlimit, hybrid cgroups), runc
# with cgroupfs works with explicit ulimits below the hard limits (nofile 20000 here).
pm() { podman --runtime runc --cgroup-manager=cgroupfs "$@"; }
# pm, and the exact command line first, for the operator's log.
pm_shown() {
  say "\$ $(printf '%q ' podman --runtime runc --cgroup-manager=cgroupfs "$@")"
  pm "$@"
}
readonly -a RUN_FLAGS=(--network host --ulimit nofile=10000:20000 --ulimit nproc=4096:8192)

setup_containers_conf() {
  cat >"$work/containers.conf" <<'EOF'
[containers]
default_ulimits = []
EOF
  export CONTAINERS_CONF=$work/containers.conf
}

preflight() {
  [[ $(id -u) == 0 ]] || fatal 'preflight: run as root (rootful podman; PostgreSQL runs as the postgres user)'
  local missing=() tool
  for tool in podman buildah runc debootstrap curl jq md5sum ss redis-server redis-cli runuser timeout; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  pg_bin >/dev/null || missing+=(postgresql)
  ((${#missing[@]} == 0)) || fatal "preflight: missing ${missing[*]}" \
    '(apt-get install -y podman buildah runc debootstrap jq redis-server postgresql)'
  pass 'preflight: tools present'
}

# --- PostgreSQL and Redis of this run, on free loopback ports -------------------------------------

pg_bin() {
  local d
  for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r); do
    [[ -x $d/initdb ]] && { printf '%s\n' "$d"; return 0; }
  done
  return 1
}

# A port nothing listens on. Random rather than "bind to 0" because the services bind it later.
free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 40000))
    [[ -z $(ss -Htln "sport = :$port") ]] && { printf '%s\n' "$port"; return; }
  done
}

start_postgres() {
  local bin
  bin=$(pg_bin)
  pg_port=$(free_port)
  id -u postgres >/dev/null 2>&1 || useradd --system --user-group --no-create-home postgres
  # PostgreSQL refuses to run as root: the cluster belongs to the postgres user.
  chmod 755 "$work"
  install -d -o postgres -g postgres -m 700 "$work/pg"
  runuser -u postgres -- "$bin/initdb" -D "$work/pg" -U postgres --auth=trust -E UTF8 --lc-collate=C \
    --lc-ctype=C.UTF-8 >"$work/initdb.log" 2>&1 || fatal "postgres: initdb failed ($work/initdb.log)"
  runuser -u postgres -- "$bin/pg_ctl" start -w -t 60 -D "$work/pg" -l "$work/pg/log" \
    -o "-c port=$pg_port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$work/pg" >/dev/null \
    || fatal "postgres: pg_ctl start failed ($work/pg/log)"
  pg_started=1
  runuser -u postgres -- "$bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres contacts
  DATABASE_URL=postgres://postgres@127.0.0.1:$pg_port/contacts
  pass "postgres: own cluster on 127.0.0.1:$pg_port"
}

stop_postgres() {
  ((pg_started)) || return 0
  runuser -u postgres -- "$(pg_bin)/pg_ctl" stop -D "$work/pg" -m fast -w >/dev/null 2>&1 || true
}

start_redis() {
  redis_port=$(free_port)
  mkdir -p "$work/redis"
  redis-server --port "$redis_port" --bind 127.0.0.1 --daemonize yes --pidfile "$work/redis/pid" \
    --dir "$work/redis" --logfile "$work/redis/log" --save '' --appendonly no \
    || fatal 'redis: redis-server failed to start'
  redis_started=1
  wait_for 10 redis_answers || fatal "redis: no PONG on 127.0.0.1:$redis_port ($work/redis/log)"
  REDIS_URL=redis://127.0.0.1:$redis_port
  pass "redis: own redis-server on 127.0.0.1:$redis_port"
}

redis_answers() { redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG; }

stop_redis() {
  ((redis_started)) || return 0
  local pid
  pid=$(cat "$work/redis/pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
}

# --- the image ------------------------------------------------------------------------------------

build_image() {
  bash "$here/base-images.sh" 2>&1 | sed 's/^/    /' || fatal 'base images: stand-ins could not be made'
  pass 'base images: stand-ins for the Dockerfile FROM images present'
  # --format docker: the OCI image format has no HEALTHCHECK and buildah drops it with only a warning.
  # --pull-never: the FROM images are the local stand-ins; no registry serves them.
  local cmd=(buildah bud --isolation chroot --format docker --pull-never -t "$IMAGE" -f "$repo/Dockerfile" "$repo")
  say "build: ${cmd[*]}"
  local start=$SECONDS previous
  previous=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null) || previous=
  "${cmd[@]}" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; fatal 'build: buildah bud failed'; }
  build_secs=$((SECONDS - start))
  pass "build: $IMAGE built in ${build_secs}s"
  # The image this tag named before is now untagged: drop it rather than pile one up per run.
  [[ -n $previous && $previous != "$(podman image inspect --format '{{.Id}}' "$IMAGE")" ]] \
    && podman rmi "$previous" >/dev/null 2>&1 || true
}

report_image() {
  local bytes user health
  bytes=$(podman image inspect --format '{{.Size}}' "$IMAGE")
  say "image size: $IMAGE $bytes bytes = $((bytes / 1000000)) MB ($((bytes / 1048576)) MiB)"
  local base app
  base=$(podman image inspect --format '{{.Size}}' "$(awk 'toupper($1) == "FROM" { b = $2 } END { print b }' \
    "$repo/Dockerfile")")
  app=$(pm run --rm --entrypoint du "$IMAGE" -sm /app/node_modules /app/src /app/worker /app/sql 2>/dev/null \
    | paste -sd' ')
  say "image layers: runtime base $((base / 1000000)) MB + the app $(((bytes - base) / 1000000)) MB (du -sm: $app)"
  user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
  [[ -n $user && $user != 0 && $user != root && $user != 0:* ]] \
    && pass "image: runs as user '$user'" || fail "image: runs as user '$user' (root)"
  health=$(podman image inspect --format '{{json .HealthCheck}}' "$IMAGE")
  [[ $health == *healthcheck* ]] && pass "image: HEALTHCHECK $health" || fail "image: no HEALTHCHECK ($health)"
}

# The deps stage runs `npm install`, not `npm ci` (README, Quick start): check that what it installed
# is exactly the lockfile's versions of the production dependencies.
check_lockfile() {
  local out
  out=$(pm run --rm -v "$repo/package-lock.json:/tmp/package-lock.json:ro" --entrypoint bun "$IMAGE" -e '
    const lock = await Bun.file("/tmp/package-lock.json").json();
    const r = { matching: 0, differing: [], missing: [] };
    for (const [path, p] of Object.entries(lock.packages)) {
      if (!path.startsWith("node_modules/") || p.dev) continue;
      const file = Bun.file(`/app/${path}/package.json`);
      if (!(await file.exists())) { if (!p.optional) r.missing.push(path); continue; }
      const { version } = await file.json();
      if (version === p.version) r.matching++;
      else r.differing.push(`${path} ${version} (lock: ${p.version})`);
    }
    console.log(JSON.stringify(r));' 2>/dev/null) \
    || { fail 'image: could not compare node_modules with the lockfile'; return; }
  [[ $(jq '(.differing | length) + (.missing | length)' <<<"$out") == 0 ]] \
    && pass "image: node_modules are the lockfile's versions $out" \
    || fail "image: node_modules differ from the lockfile $out"
}

# The deps stage applies patches/ to postgres.js (npm install --ignore-scripts skips the postinstall
# script that does it elsewhere). Check that the module Bun loads for `import postgres from
# 'postgres'` is the patched one: every hunk of every patch file must be the text of its file in the
# image at the line it names, and the directory of the resolved entry must hold a patched file with a
# "Patched (patches/…" marker. A Dockerfile that dropped the patch step fails here, not in production.
check_patched() {
  local out
  out=$(pm run --rm -v "$repo/patches:/tmp/patches:ro" --entrypoint bun "$IMAGE" -e '
    const { readdirSync } = await import("node:fs");
    const { dirname, relative } = await import("node:path");
    const app = "/app", patches = "/tmp/patches";
    const marker = "Patched (patches/";
    // What `import postgres from "postgres"` in src/ loads: Bun resolves the "bun" export condition.
    const entry = Bun.resolveSync("postgres", `${app}/src`);
    const r = { entry: relative(app, entry), files: [], problems: [], marker: null };
    for (const name of readdirSync(patches).filter((n) => n.endsWith(".patch")).sort()) {
      const text = await Bun.file(`${patches}/${name}`).text();
      for (const section of text.split(/^diff --git /m).slice(1)) {
        const path = section.match(/^a\/(\S+)/)[1];
        const file = Bun.file(`${app}/${path}`);
        if (!(await file.exists())) { r.problems.push(`${path}: missing`); continue; }
        const lines = (await file.text()).split("\n");
        let hunks = 0;
        // The new side of each hunk (its context and added lines) must be the text of the file at the
        // line the hunk names: the file is exactly what applying the patch makes of it.
        for (const hunk of section.split(/^@@ /m).slice(1)) {
          const [, start, count = "1"] = hunk.match(/^-\S+ \+(\d+)(?:,(\d+))? @@/);
          const want = hunk.split("\n").slice(1).filter((l) => !/^[-\\]/.test(l))
            .slice(0, Number(count)).map((l) => l.slice(1));
          const have = lines.slice(Number(start) - 1, Number(start) - 1 + want.length);
          if (have.join("\n") === want.join("\n")) hunks++;
          else r.problems.push(`${path}: hunk at line ${start} not applied`);
        }
        const marks = lines.filter((l) => l.includes(marker));
        r.files.push({ path, hunks, markers: marks.length });
        if (dirname(`${app}/${path}`) === dirname(entry) && marks.length && !r.marker)
          r.marker = `${path}: ${marks[0].trim()}`;
      }
    }
    if (!r.marker) r.problems.push(`no patched file with a marker beside ${r.entry}, the module Bun loads`);
    console.log(JSON.stringify(r));' 2>"$work/patched.err") \
    || { fail "image: could not check the postgres.js patch: $out" \
      "$(grep -v systemd "$work/patched.err" || true)"; return; }
  if jq -e '.problems == []' <<<"$out" >/dev/null 2>&1; then
    pass "image: postgres.js patched, every hunk in place (Bun loads $(jq -r .entry <<<"$out")):" \
      "$(jq -c '[.files[] | "\(.path) \(.hunks) hunks, \(.markers) markers"]' <<<"$out")"
    pass "image: patched marker in the loaded module: $(jq -r .marker <<<"$out")"
  else
    fail "image: postgres.js not patched as patches/ says: $out"
  fi
}

# --- the containers -------------------------------------------------------------------------------

container_env() {
  env_args=(-e "DATABASE_URL=$DATABASE_URL" -e "REDIS_URL=$REDIS_URL" -e "PORT=$api_port"
    -e "PUBLIC_URL=http://127.0.0.1:$api_port")
}

# A one-shot container of the image (migrate, admin: they need only the database); its stdout is the
# command's JSON. Named after the run, so that cleanup finds one an interrupted run left behind.
oneshot() {
  pm_shown run --rm --name "$RUN-$1-$RANDOM" "${RUN_FLAGS[@]}" -e "DATABASE_URL=$DATABASE_URL" "$IMAGE" "$@"
}

run_migrate() {
  local out count code=0
  count=$(find "$repo/sql/migrations" -name '*.sql' | wc -l)
  out=$(oneshot migrate 2>"$work/migrate.err") || code=$?
  if ((code == 0)); then
    [[ $(jq '.applied | length' <<<"$out") == "$count" ]] \
      && pass "migrate: exit 0, applied $count migrations: $out" \
      || fail "migrate: exit 0 but applied is not the $count files: $out"
  else
    grep -v 'systemd' "$work/migrate.err" >&2
    fatal "migrate: exit code $code"
  fi
  out=$(oneshot migrate 2>/dev/null) && [[ $(jq '.applied | length' <<<"$out") == 0 ]] \
    && pass "migrate: second run exit 0, nothing to apply: $out" || fail "migrate: second run: $out"
}

start_services() {
  pm volume create "$VOLUME" >/dev/null
  # The local object store on a volume both containers mount: the API's upload link writes the file,
  # the worker reads it. Only the objects are shared, not DATA_DIR, so each container's HEALTHCHECK
  # sees only its own heartbeat file.
  start_container "$API"
  start_container "$WORKER" worker
  # podman schedules HEALTHCHECK runs with systemd timers; with no systemd here it logs an error per
  # container and runs nothing by itself: the checks below run it with `podman healthcheck run`.
  grep -q 'unable to get systemd connection' "$work"/*.run.err \
    && say 'podman: no systemd, so no HEALTHCHECK timers (run on demand below)'
}

# start_container NAME [ROLE]: detached, stderr kept for the report.
start_container() {
  local name=$1
  shift
  pm_shown run -d --name "$name" "${RUN_FLAGS[@]}" "${env_args[@]}" -v "$VOLUME:/data/objects" "$IMAGE" "$@" \
    >/dev/null 2>"$work/$name.run.err" || { cat "$work/$name.run.err" >&2; fatal "$name: podman run failed"; }
}

# wait_for SECONDS CMD…: retries the command every half second.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

api_url() { printf 'http://127.0.0.1:%s%s' "$api_port" "$1"; }
logs_say() { pm logs "$1" 2>&1 | grep -q "$2"; }

check_up() {
  wait_for 60 curl -fsS "$(api_url /healthz)" || fatal 'api: /healthz did not answer 200 within 60 s'
  pass "api: GET /healthz $(curl -sS "$(api_url /healthz)")"
  local ready
  ready=$(curl -sS -w ' %{http_code}' "$(api_url /readyz)")
  [[ $ready == *' 200' ]] && pass "api: GET /readyz $ready" || fail "api: GET /readyz $ready"
  wait_for 60 logs_say "$WORKER" 'worker started' && pass 'worker: logged "worker started"' \
    || fail 'worker: did not log "worker started" within 60 s'
}

# `podman healthcheck run` runs the image's HEALTHCHECK once (no systemd timers here) and records it.
check_health() {
  local c=$1 status
  if pm_shown healthcheck run "$c" >"$work/health.out" 2>&1; then
    status=$(pm inspect --format '{{.State.Health.Status}}' "$c")
    [[ $status == healthy ]] && pass "$c: HEALTHCHECK $status" || fail "$c: HEALTHCHECK status $status"
  else
    fail "$c: HEALTHCHECK failed: $(cat "$work/health.out")"
  fi
}

# Which branch of src/cli/healthcheck.ts made each container healthy: the worker by its heartbeat
# file, the API by /healthz with no heartbeat file in its DATA_DIR to stand in for it.
check_health_sources() {
  local age
  age=$(pm exec "$WORKER" sh -c 'echo $(( $(date +%s) - $(stat -c %Y /data/worker-heartbeat) ))') \
    && ((age < 60)) && pass "worker: heartbeat file /data/worker-heartbeat is ${age}s old" \
    || fail 'worker: no fresh /data/worker-heartbeat'
  pm exec "$API" test ! -e /data/worker-heartbeat && pass 'api: no heartbeat file, so healthy means /healthz' \
    || fail 'api: a worker heartbeat file in the API container masks its /healthz check'
}

check_non_root() {
  local c uid
  for c in "$API" "$WORKER"; do
    uid=$(pm exec "$c" id -u)
    [[ $uid != 0 ]] && pass "$c: runs as non-root ($(pm exec "$c" id))" || fail "$c: runs as root"
  done
  # The service may write its data directory, not the code it runs.
  local dirs=(/data /data/objects /app/src /app/node_modules)
  pm exec "$API" sh -c 'test -w /data && test -w /data/objects && ! test -w /app/src && ! test -w /app/node_modules' \
    && pass "$API: /data writable, /app/src and /app/node_modules read-only to the service" \
    || fail "$API: wrong permissions: $(pm exec "$API" ls -ld "${dirs[@]}" | paste -sd' ')"
}

# --- a contact import end to end ------------------------------------------------------------------

# admin CMD…: the admin CLI in a one-shot container; its JSON on stdout, a FAIL on a non-zero exit.
admin() {
  local out
  out=$(oneshot admin "$@" 2>"$work/admin.err") \
    || { grep -v systemd "$work/admin.err" >&2; fatal "admin $1 $2: failed"; }
  printf '%s\n' "$out"
}

# api METHOD PATH [BODY]: the response body, then the status code on a line of its own.
api() {
  local args=(-sS -X "$1" -H "Authorization: Bearer $key" -w '\n%{http_code}')
  [[ $# -gt 2 ]] && args+=(-H 'Content-Type: application/json' -d "$3")
  curl "${args[@]}" "$(api_url "$2")"
}
body() { sed '$d' <<<"$1"; }
code() { tail -n1 <<<"$1"; }

write_csv() {
  # 5 rows: ann twice (the last one wins), one malformed email, one empty age (not sent).
  cat >"$work/contacts.csv" <<'EOF'
Email,firstName,age
ann@example.com,Ann,42
bob@example.com,Bob,7
carol@example.com,Carol,
not-an-email,Nobody,1
Ann@Example.com,Anna,43
EOF
}

run_import() {
  local account r import_id upload_url status
  account=$(admin account create --name 'Container check' | jq -r .id)
  key=$(admin key create --account "$account" | jq -r .key)
  admin attribute create --account "$account" --name firstName --type string >/dev/null
  admin attribute create --account "$account" --name age --type number >/dev/null
  pass "admin: account $account, a key and two attributes made from the image"

  r=$(api POST /v1/contact-imports '{"columns":["Email","firstName","age"],"duplicateContactStrategy":"overwrite"}')
  [[ $(code "$r") == 201 ]] || fatal "import: POST /v1/contact-imports $(code "$r") $(body "$r")"
  import_id=$(body "$r" | jq -r .id)
  upload_url=$(body "$r" | jq -r .uploadUrl)
  pass "import: POST /v1/contact-imports 201 id=$import_id"

  write_csv
  r=$(curl -sS -X PUT --upload-file "$work/contacts.csv" -w '\n%{http_code}' "$upload_url")
  [[ $(code "$r") == 200 ]] || fatal "import: PUT uploadUrl $(code "$r") $(body "$r")"
  pass "import: PUT ${upload_url%%/uploads/*}/uploads/… 200"

  local deadline=$((SECONDS + 120)) started=$SECONDS
  while :; do
    r=$(api GET "/v1/contact-imports/$import_id")
    status=$(body "$r" | jq -r .status)
    [[ $status == success || $status == failed ]] && break
    ((SECONDS < deadline)) || fatal "import: still $status after 120 s"
    sleep 1
  done
  local result
  result=$(body "$r" | jq -c '{status, rowCount, addedCount, updatedCount, skippedCount, malformedCount,
    duplicateInFileCount}')
  say "import result after $((SECONDS - started))s: $result"
  [[ $result == '{"status":"success","rowCount":3,"addedCount":3,"updatedCount":0,"skippedCount":0,'\
'"malformedCount":1,"duplicateInFileCount":1}' ]] \
    && pass "import: success $result" || fail "import: unexpected result $result $(body "$r" | jq -c .failureReason)"

  local md5 contact
  md5=$(printf '%s' ann@example.com | md5sum | cut -d' ' -f1)
  r=$(api GET "/v1/contacts/$md5")
  contact=$(body "$r" | jq -c '{email, attributes}')
  [[ $(code "$r") == 200 && $(body "$r" | jq -r '.attributes.firstName, .attributes.age' | paste -sd,) == Anna,43 ]] \
    && pass "import: GET /v1/contacts/$md5 200 $contact" || fail "import: GET contact $(code "$r") $(body "$r")"
}

# --- SIGTERM ----------------------------------------------------------------------------------------

# stop_cleanly CONTAINER stop|kill: SIGTERM by `podman stop -t 10` (as an orchestrator stops it) or by
# `podman kill -s TERM`; the process must exit 0 by itself, well before podman's SIGKILL at 10 s.
stop_cleanly() {
  local c=$1 how=$2 start=$SECONDS code
  # (stderr: podman's complaint that there is no systemd to remove HEALTHCHECK timers from)
  if [[ $how == stop ]]; then
    pm_shown stop -t 10 "$c" >/dev/null 2>>"$work/podman.err"
  else
    pm_shown kill -s TERM "$c" >/dev/null 2>>"$work/podman.err"
    timeout 15 podman wait "$c" >/dev/null 2>>"$work/podman.err" || true
  fi
  code=$(pm inspect --format '{{.State.ExitCode}} {{.State.Status}}' "$c")
  local line
  line=$(pm logs "$c" 2>&1 | grep -m1 'shutting down' | cut -c1-140)
  [[ $code == '0 exited' && -n $line ]] \
    && pass "$c: SIGTERM ($how) → exit 0 in $((SECONDS - start))s; logged $line" \
    || fail "$c: SIGTERM ($how) → exit code/status '$code' after $((SECONDS - start))s; shutdown line '$line'"
}

# A worker that cannot reach Redis: still starting, with no heartbeat and no signal handlers yet.
# 1. Its HEALTHCHECK must not say healthy, although an API on the same host network answers /healthz
#    on 127.0.0.1:$PORT: src/cli/healthcheck.ts judges a worker container by its heartbeat only.
# 2. A SIGTERM must end it at once, not be ignored as the kernel ignores an unhandled signal to PID 1
#    until podman's SIGKILL (exit 137 after 10 s). `bun run` as PID 1 forwards it and the child dies
#    of it: 143, the code of a process that a SIGTERM ended.
check_starting_worker() {
  local c=$RUN-starting start code
  pm run -d --name "$c" "${RUN_FLAGS[@]}" -e "DATABASE_URL=$DATABASE_URL" -e REDIS_URL=redis://127.0.0.1:1 \
    -e "PORT=$api_port" "$IMAGE" worker >/dev/null 2>&1 || { fail 'starting worker: podman run failed'; return; }
  sleep 3
  if pm healthcheck run "$c" >/dev/null 2>&1; then
    fail "starting worker (no heartbeat, Redis unreachable): HEALTHCHECK healthy (the API's /healthz answered?)"
  else
    pass 'starting worker (no heartbeat, Redis unreachable): HEALTHCHECK not healthy'
  fi
  start=$SECONDS
  pm stop -t 10 "$c" >/dev/null 2>&1
  code=$(pm inspect --format '{{.State.ExitCode}}' "$c")
  ((code == 143 && SECONDS - start < 5)) \
    && pass "starting worker: SIGTERM (stop) → exit $code in $((SECONDS - start))s, not ignored" \
    || fail "starting worker: SIGTERM (stop) → exit $code after $((SECONDS - start))s"
  pm rm -f -t 0 "$c" >/dev/null 2>&1
}

# --- cleanup ---------------------------------------------------------------------------------------

cleanup() {
  local code=$?
  set +e
  trap - ERR
  # A signal's trap can run inside a redirected function call (pm … >file): write to the script's own
  # stdout and stderr again.
  exec 1>&3 2>&4
  if ((failures > 0)) || ((code != 0)); then dump_logs; fi
  pm rm -f -t 0 "$API" "$WORKER" >/dev/null 2>&1
  pm ps -a --filter "name=^$RUN-" --format '{{.Names}}' | xargs -r podman rm -f -t 0 >/dev/null 2>&1
  pm volume rm -f "$VOLUME" >/dev/null 2>&1
  stop_postgres
  stop_redis
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $work"; elif [[ -n $work ]]; then rm -rf "$work"; fi
  if ((failures > 0)) || ((code != 0)); then
    printf 'RESULT: FAIL (%s failed checks)\n' "$failures"
    exit 1
  fi
  printf 'RESULT: PASS\n'
}

dump_logs() {
  local c
  for c in "$API" "$WORKER"; do
    pm container exists "$c" 2>/dev/null || continue
    say "--- last log lines of $c"
    pm logs --tail 40 "$c" 2>&1 | sed 's/^/    /'
  done
}

main() {
  exec 3>&1 4>&2 # the script's stdout and stderr, for cleanup
  trap 'fail "aborted: line $LINENO: $BASH_COMMAND"' ERR
  trap cleanup EXIT
  trap 'fail "interrupted by a signal"; exit 130' INT TERM
  work=$(mktemp -d /tmp/cs-check.XXXXXX)
  setup_containers_conf
  preflight
  build_image
  report_image
  check_lockfile
  check_patched
  start_postgres
  start_redis
  api_port=$(free_port)
  container_env
  run_migrate
  start_services
  check_up
  check_health "$API"
  check_health "$WORKER"
  check_health_sources
  check_non_root
  run_import
  check_starting_worker
  stop_cleanly "$API" stop
  stop_cleanly "$WORKER" kill
}

main "$@"
