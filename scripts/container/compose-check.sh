#!/usr/bin/env bash
# SC2015: pass never fails, so `cond && pass … || fail …` is an if/else here.
# SC2016: the single-quoted $… are for the containers' shells.
# shellcheck disable=SC2015,SC2016
# Brings compose.yaml up with podman-compose (Debian's package; no Docker engine or registry needed:
# ../shared/containers.md) and proves it works:
#   the images (the service's built from the Dockerfile; local stand-ins for PostgreSQL, Redis, MinIO
#   and nginx, compose-images.sh) · `up` · every service healthy · migrate ran once · both API
#   replicas answer and share the published port · a 100,000-row import end to end through the
#   published port, the file PUT to the store's presigned link · an export downloaded from the store ·
#   an API replica and the worker killed (SIGKILL) and back by their restart policy · `down`, `up`
#   again, the data still there.
# Prints PASS/FAIL lines; exits non-zero on any FAIL. Removes what it started (containers, volumes,
# network), also on failure or Ctrl-C; the images stay. Run as root:  bash scripts/container/compose-check.sh
# Environment: APP_IMAGE (default localhost/contact-service:compose-check, built here unless
# BUILD=0), ROWS (100000), KEEP=1 keeps the temp dir and logs.
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
readonly here repo
readonly ROWS=${ROWS:-100000}
export APP_IMAGE=${APP_IMAGE:-localhost/contact-service:compose-check}
export COMPOSE_PROJECT=cs-compose-$$ # podman-compose's -p: the prefix of every container, volume, network
readonly P=$COMPOSE_PROJECT

work=
failures=0
key=

say() { printf '[compose-check] %s\n' "$*" >&4; }
pass() { printf 'PASS %s\n' "$*"; }
fail() {
  printf 'FAIL %s\n' "$*"
  failures=$((failures + 1))
}
fatal() {
  fail "$*"
  exit 1
}

# wait_for SECONDS CMD…: retries the command every second.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}

free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 40000))
    [[ -z $(ss -Htln "sport = :$port") ]] && { printf '%s\n' "$port"; return; }
  done
}

# podman as containers.md says works here (runc, cgroupfs, ulimits below the hard limits), set in a
# containers.conf rather than on the command line so that podman-compose's podman calls, and the
# `podman container cleanup` that conmon runs when a container exits (where restart policies act),
# all use it.
setup_containers_conf() {
  cat >"$work/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=10000:20000", "nproc=4096:8192"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
  export CONTAINERS_CONF=$work/containers.conf
}

preflight() {
  [[ $(id -u) == 0 ]] || fatal 'preflight: run as root (rootful podman)'
  local missing=() tool
  for tool in podman podman-compose buildah runc debootstrap curl jq ss sha256sum timeout; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  ((${#missing[@]} == 0)) || fatal "preflight: missing ${missing[*]}" \
    '(apt-get install -y podman podman-compose buildah runc debootstrap jq curl)'
  local version
  version=$(podman-compose version 2>/dev/null | sed -n 's/^podman-composer* version *//p')
  pass "preflight: podman-compose $version, $(podman --version)"
}

# --- images ---------------------------------------------------------------------------------------

build_images() {
  local env
  env=$(bash "$here/compose-images.sh" 2> >(sed 's/^/    /' >&4)) || fatal 'images: stand-ins could not be made'
  while IFS='=' read -r name value; do export "$name=$value"; done <<<"$env"
  pass "images: stand-ins $(paste -sd' ' <<<"$env")"
  if [[ ${BUILD:-1} == 0 ]] && podman image exists "$APP_IMAGE"; then
    pass "images: $APP_IMAGE kept (BUILD=0)"
    return
  fi
  # As check.sh builds it: --format docker keeps the HEALTHCHECK; the FROM images are the stand-ins.
  local start=$SECONDS previous
  previous=$(podman image inspect --format '{{.Id}}' "$APP_IMAGE" 2>/dev/null) || previous=
  buildah bud --isolation chroot --format docker --pull-never -t "$APP_IMAGE" -f "$repo/Dockerfile" "$repo" \
    >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; fatal 'images: buildah bud failed'; }
  [[ -n $previous && $previous != "$(podman image inspect --format '{{.Id}}' "$APP_IMAGE")" ]] \
    && podman rmi "$previous" >/dev/null 2>&1 || true
  pass "images: $APP_IMAGE built from the Dockerfile in $((SECONDS - start))s"
}

# --- the stack ------------------------------------------------------------------------------------

compose_env() {
  API_PORT=$(free_port)
  S3_PORT=$(free_port)
  export API_PORT S3_PORT
  export PUBLIC_URL=http://127.0.0.1:$API_PORT S3_PUBLIC_ENDPOINT=http://127.0.0.1:$S3_PORT
  POSTGRES_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
  S3_SECRET_ACCESS_KEY=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
  export POSTGRES_PASSWORD S3_SECRET_ACCESS_KEY
}

# compose ARGS…: podman-compose on the repository's compose.yaml, its chatter into compose.log.
compose() {
  printf '\n$ podman-compose -p %s %s\n' "$P" "$*" >>"$work/compose.log"
  podman-compose -p "$P" -f "$repo/compose.yaml" "$@" >>"$work/compose.log" 2>&1
}

# The container of a service (podman-compose names them <project>_<service>_1).
c() { printf '%s_%s_1' "$P" "$1"; }

readonly LONG_RUNNING=(postgres redis s3 api-1 api-2 worker proxy)

# podman runs HEALTHCHECKs on systemd timers; with no systemd here nothing runs them by itself, so
# the check runs each one with `podman healthcheck run` (what a timer would run) until it passes.
healthy() { podman healthcheck run "$(c "$1")" >/dev/null 2>&1; }
exited_0() { [[ $(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$(c "$1")") == 'exited 0' ]]; }

up() {
  local label=$1 start=$SECONDS s
  compose up -d --no-build || { tail -20 "$work/compose.log"; fatal "$label: podman-compose up failed"; }
  for s in bucket migrate; do
    wait_for 180 exited_0 "$s" || fatal "$label: $s did not exit 0 within 180 s"
  done
  for s in "${LONG_RUNNING[@]}"; do
    wait_for 180 healthy "$s" || fatal "$label: $s not healthy within 180 s ($(podman inspect --format \
      '{{.State.Status}} restarts={{.RestartCount}}' "$(c "$s")" 2>&1))"
  done
  pass "$label: podman-compose up -d; bucket and migrate exited 0; ${LONG_RUNNING[*]} healthy in $((SECONDS - start))s"
}

psql_() { podman exec "$(c postgres)" psql -U contacts -d contacts -Atc "$1"; }

# The migrate service applied every migration once; the API replicas and the worker applied none.
check_migrate_once() {
  local files runs rows distinct on_start
  files=$(find "$repo/sql/migrations" -name '*.sql' | wc -l)
  runs=$(podman logs "$(c migrate)" 2>/dev/null | grep -c '^{"applied"' || true)
  rows=$(podman logs "$(c migrate)" 2>/dev/null | grep '^{"applied"' | jq '.applied | length')
  distinct=$(psql_ 'select count(*), count(distinct version) from schema_migrations')
  on_start=$(podman exec "$(c api-1)" printenv MIGRATE_ON_START)
  [[ $runs == 1 && $rows == "$files" && $distinct == "$files|$files" && $on_start == false ]] \
    && pass "migrate: ran once (restarts before PostgreSQL answered: $(podman inspect --format '{{.RestartCount}}' \
      "$(c migrate)")), applied all $files migrations; schema_migrations $distinct rows/versions; API MIGRATE_ON_START=$on_start" \
    || fail "migrate: runs=$runs applied=$rows of $files; schema_migrations rows/versions=$distinct; MIGRATE_ON_START=$on_start"
}

# GET URL from inside the compose network (the proxy's wget), as the replicas' neighbours see them.
inside() { podman exec "$(c proxy)" wget -qO- "$1"; }

check_replicas() {
  local s out
  for s in api-1 api-2; do
    out=$(inside "http://$s:3000/healthz") && pass "$s: GET http://$s:3000/healthz (inside the network) $out" \
      || fail "$s: no answer at http://$s:3000/healthz"
  done
  check_spread 'proxy'
}

# check_spread LABEL [SECONDS]: 20 GETs through the published port all answer 200, and the proxy's
# access log (upstream=ADDRESS, ops/compose/nginx.conf) shows both replicas among those that answered
# them; tried again for up to SECONDS (nginx leaves a replica that failed alone for its fail_timeout).
check_spread() {
  local deadline=$((SECONDS + ${2:-0})) tries=0 since codes ip1 ip2 n1 n2
  ip1=$(podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$(c api-1)")
  ip2=$(podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$(c api-2)")
  while :; do
    tries=$((tries + 1))
    since=$(date +%s)
    codes=$(for _ in $(seq 20); do curl -sS -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $key" \
      "$PUBLIC_URL/v1/contact-imports"; done | sort | uniq -c | xargs)
    podman logs --since "$since" "$(c proxy)" 2>/dev/null | grep -F 'GET /v1/contact-imports HTTP' >"$work/spread" || true
    n1=$(grep -c "upstream=$ip1:3000 " "$work/spread" || true)
    n2=$(grep -c "upstream=$ip2:3000 " "$work/spread" || true)
    [[ $codes == '20 200' ]] && ((n1 > 0 && n2 > 0)) && break
    ((SECONDS < deadline)) || break
    sleep 1
  done
  [[ $codes == '20 200' ]] && ((n1 > 0 && n2 > 0)) \
    && pass "$1: 20 GET $PUBLIC_URL/v1/contact-imports → $codes; answered by api-1 ($ip1) $n1, api-2 ($ip2) $n2\
$( ((tries > 1)) && printf ' (on round %s of 20 GETs each)' "$tries")" \
    || fail "$1: 20 GETs → $codes; answered by api-1 ($ip1) $n1, api-2 ($ip2) $n2 (proxy log: $(tail -1 "$work/spread"))"
}

# --- the data path --------------------------------------------------------------------------------

admin() { podman exec "$(c api-1)" bun run admin "$@" 2>>"$work/admin.err"; }

# api METHOD PATH [BODY]: through the published port; the body, then the status on a line of its own.
api() {
  local args=(-sS -X "$1" -H "Authorization: Bearer $key" -w '\n%{http_code}')
  [[ $# -gt 2 ]] && args+=(-H 'Content-Type: application/json' -d "$3")
  curl "${args[@]}" "$PUBLIC_URL$2"
}
body() { sed '$d' <<<"$1"; }
code() { tail -n1 <<<"$1"; }

make_account() {
  local account
  account=$(admin account create --name 'Compose check' | jq -r .id) || fatal 'admin: account create failed'
  key=$(admin key create --account "$account" | jq -r .key) || fatal 'admin: key create failed'
  admin attribute create --account "$account" --name firstName --type string >/dev/null
  admin attribute create --account "$account" --name age --type number >/dev/null
  pass "admin (bun run admin in api-1): account $account, a key, two attributes"
}

# poll PATH SECONDS: until the resource's status is success or failed; its last response in $polled.
poll() {
  local deadline=$((SECONDS + $2)) status
  while :; do
    polled=$(api GET "$1")
    status=$(body "$polled" | jq -r .status)
    [[ $status == success || $status == failed ]] && return 0
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}

run_import() {
  awk -v n="$ROWS" 'BEGIN { print "Email,firstName,age"; for (i = 1; i <= n; i++) printf "user%d@example.com,User %d,%d\n", i, i, i % 90 }' \
    >"$work/contacts.csv"
  local r id url start=$SECONDS
  r=$(api POST /v1/contact-imports '{"columns":["Email","firstName","age"],"duplicateContactStrategy":"overwrite"}')
  [[ $(code "$r") == 201 ]] || fatal "import: POST /v1/contact-imports $(code "$r") $(body "$r")"
  id=$(body "$r" | jq -r .id)
  url=$(body "$r" | jq -r .uploadUrl)
  [[ $url == "$S3_PUBLIC_ENDPOINT/"* ]] && pass "import: POST $PUBLIC_URL/v1/contact-imports 201; uploadUrl ${url%%\?*}?…" \
    || fatal "import: uploadUrl $url is not on the published store $S3_PUBLIC_ENDPOINT"
  r=$(curl -sS -X PUT --upload-file "$work/contacts.csv" -w '\n%{http_code}' "$url")
  [[ $(code "$r") == 200 ]] || fatal "import: PUT to the presigned link $(code "$r") $(body "$r")"
  pass "import: PUT $(du -h "$work/contacts.csv" | cut -f1) ($ROWS rows) to the presigned link 200"
  poll "/v1/contact-imports/$id" 300 || fatal "import: not finished after 300 s: $(body "$polled" | jq -c .)"
  local result
  result=$(body "$polled" | jq -c '{status, rowCount, addedCount, malformedCount, duplicateInFileCount}')
  [[ $result == "{\"status\":\"success\",\"rowCount\":$ROWS,\"addedCount\":$ROWS,\"malformedCount\":0,\"duplicateInFileCount\":0}" ]] \
    && pass "import: $result in $((SECONDS - start))s from the POST" \
    || fail "import: $result $(body "$polled" | jq -c .failureReason)"
  local md5
  md5=$(printf '%s' "user$ROWS@example.com" | md5sum | cut -d' ' -f1)
  r=$(api GET "/v1/contacts/$md5")
  [[ $(code "$r") == 200 && $(body "$r" | jq -r .attributes.firstName) == "User $ROWS" ]] \
    && pass "import: GET /v1/contacts/$md5 200 $(body "$r" | jq -c '{email, attributes}')" \
    || fail "import: GET /v1/contacts/$md5 $(code "$r") $(body "$r")"
}

# An export of the whole account, downloaded from the store's presigned link: its emails are the file's.
run_export() {
  local r url start=$SECONDS
  r=$(api POST /v1/contact-exports '{"columns":["Email","firstName","age"]}')
  [[ $(code "$r") == 201 || $(code "$r") == 202 || $(code "$r") == 200 ]] \
    || fatal "export: POST /v1/contact-exports $(code "$r") $(body "$r")"
  export_id=$(body "$r" | jq -r .id)
  poll "/v1/contact-exports/$export_id" 300 || fatal "export: not finished after 300 s: $(body "$polled" | jq -c .)"
  [[ $(body "$polled" | jq -r .status) == success ]] || fatal "export: $(body "$polled" | jq -c .)"
  pass "export: $export_id success, rowCount $(body "$polled" | jq .rowCount), in $((SECONDS - start))s"
  download_export "export"
}

# download_export LABEL: GET the export, fetch its downloadUrl, compare its emails with the import's.
download_export() {
  local r url
  r=$(api GET "/v1/contact-exports/$export_id")
  url=$(body "$r" | jq -r .downloadUrl)
  [[ $url == "$S3_PUBLIC_ENDPOINT/"* ]] || { fail "$1: downloadUrl '$url' is not on $S3_PUBLIC_ENDPOINT"; return; }
  curl -fsS -o "$work/export.csv" "$url" || { fail "$1: GET downloadUrl failed"; return; }
  local want got
  want=$(tail -n +2 "$work/contacts.csv" | cut -d, -f1 | sort | sha256sum | cut -c1-16)
  got=$(tail -n +2 "$work/export.csv" | cut -d, -f1 | tr -d '"' | sort | sha256sum | cut -c1-16)
  [[ $want == "$got" ]] \
    && pass "$1: downloaded ${url%%\?*} ($(($(wc -l <"$work/export.csv") - 1)) rows); its emails are the import's (sha256 $got)" \
    || fail "$1: the download's emails differ from the import's ($got, want $want; header $(head -1 "$work/export.csv"))"
}

# --- faults ---------------------------------------------------------------------------------------

# kill_and_back SERVICE: SIGKILL to the container's main process from outside; its restart policy
# (unless-stopped, acted on by podman when conmon reports the exit) must bring it back healthy.
kill_and_back() {
  local s=$1 pid restarts start=$SECONDS
  pid=$(podman inspect --format '{{.State.Pid}}' "$(c "$s")")
  restarts=$(podman inspect --format '{{.RestartCount}}' "$(c "$s")")
  kill -KILL "$pid"
  say "kill -KILL $pid ($(c "$s")'s main process)"
  restarted() {
    local now
    now=$(podman inspect --format '{{.RestartCount}} {{.State.Pid}}' "$(c "$s")")
    [[ ${now%% *} -gt $restarts && ${now##* } != 0 && ${now##* } != "$pid" ]]
  }
  wait_for 60 restarted || { fail "$s: not restarted within 60 s of SIGKILL"; return; }
  wait_for 90 healthy "$s" || { fail "$s: restarted but not healthy within 90 s"; return; }
  pass "$s: SIGKILL to pid $pid → restarted by its policy (RestartCount $restarts → $(podman inspect --format \
    '{{.RestartCount}}' "$(c "$s")")) and healthy in $((SECONDS - start))s"
}

# While api-2 is down the proxy sends every request to api-1.
kill_replica() {
  local pid codes
  pid=$(podman inspect --format '{{.State.Pid}}' "$(c api-2)")
  (for _ in $(seq 20); do curl -sS -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $key" \
    "$PUBLIC_URL/v1/brands"; sleep 0.1; done) >"$work/codes" 2>&1 &
  local requests=$!
  kill_and_back api-2
  wait "$requests" || true
  codes=$(sort "$work/codes" | uniq -c | paste -sd' ')
  [[ $codes =~ ^\ *20\ 200$ ]] \
    && pass "proxy: 20 GETs while api-2 (pid $pid) was killed and restarting → $(xargs <<<"$codes")" \
    || fail "proxy: GETs while api-2 was killed → $codes"
  # nginx resolved the replicas' names at its start: the restarted api-2 must be reachable there again.
  check_spread 'proxy after the restart' 30
}

# --- down and up ----------------------------------------------------------------------------------

down_up() {
  local before after r
  before=$(body "$(api GET /v1/contact-stats)" | jq -c '{total, enabled}')
  compose down || fail 'down: podman-compose down failed'
  local left
  left=$(podman ps -a --filter "label=io.podman.compose.project=$P" --format '{{.Names}}' | paste -sd' ')
  [[ -z $left ]] && pass "down: every container removed; volumes kept: $(podman volume ls --filter \
    "label=io.podman.compose.project=$P" --format '{{.Name}}' | paste -sd' ')" || fail "down: containers left: $left"
  up 'up again'
  local applied
  applied=$(podman logs "$(c migrate)" 2>/dev/null | grep '^{"applied"' | tail -1)
  [[ $applied == '{"applied":[]}' ]] && pass "up again: migrate applied nothing: $applied" \
    || fail "up again: migrate printed '$applied'"
  after=$(body "$(api GET /v1/contact-stats)" | jq -c '{total, enabled}')
  [[ $after == "$before" && $after == *"\"total\":$ROWS"* ]] \
    && pass "up again: GET /v1/contact-stats $after as before down" \
    || fail "up again: contact-stats $after, before down $before"
  local md5
  md5=$(printf '%s' user1@example.com | md5sum | cut -d' ' -f1)
  r=$(api GET "/v1/contacts/$md5")
  [[ $(code "$r") == 200 ]] && pass "up again: GET /v1/contacts/$md5 200 $(body "$r" | jq -c '{email, attributes}')" \
    || fail "up again: GET /v1/contacts/$md5 $(code "$r")"
  download_export 'up again: export'
}

# --- cleanup --------------------------------------------------------------------------------------

cleanup() {
  local code=$?
  set +e
  trap - ERR
  exec 1>&3 2>&4
  if ((failures > 0)) || ((code != 0)); then dump_logs; fi
  if [[ -n $work ]]; then
    compose down -v
    # Whatever podman-compose left (a run interrupted half-way up): by the project's label and name.
    podman ps -a --filter "label=io.podman.compose.project=$P" --format '{{.Names}}' | xargs -r podman rm -f -t 0 \
      >/dev/null 2>&1
    podman volume ls --filter "label=io.podman.compose.project=$P" --format '{{.Name}}' | xargs -r podman volume rm -f \
      >/dev/null 2>&1
    podman network ls --format '{{.Name}}' | grep -x "${P}_default" | xargs -r podman network rm -f >/dev/null 2>&1
    local left
    left=$( (podman ps -a --format '{{.Names}}'; podman volume ls --format '{{.Name}}'; podman network ls \
      --format '{{.Name}}') | grep -c "^$P" || true)
    ((left == 0)) && say "removed every container, volume and network of $P" || say "left behind: $left objects of $P"
  fi
  if [[ ${KEEP:-0} == 1 ]]; then say "kept $work"; elif [[ -n $work ]]; then rm -rf "$work"; fi
  if ((failures > 0)) || ((code != 0)); then
    printf 'RESULT: FAIL (%s failed checks)\n' "$failures"
    exit 1
  fi
  printf 'RESULT: PASS\n'
}

dump_logs() {
  local s
  for s in "${LONG_RUNNING[@]}" migrate bucket; do
    podman container exists "$(c "$s")" 2>/dev/null || continue
    say "--- last log lines of $(c "$s")"
    podman logs --tail 15 "$(c "$s")" 2>&1 | cut -c1-300 | sed 's/^/    /' >&4
  done
  [[ -s $work/compose.log ]] && { say '--- last lines of podman-compose'; tail -15 "$work/compose.log" | sed 's/^/    /' >&4; }
}

main() {
  exec 3>&1 4>&2
  trap 'fail "aborted: line $LINENO: $BASH_COMMAND"' ERR
  trap cleanup EXIT
  trap 'fail "interrupted by a signal"; exit 130' INT TERM
  work=$(mktemp -d /tmp/cs-compose.XXXXXX)
  setup_containers_conf
  preflight
  build_images
  compose_env
  local start=$SECONDS
  up up
  check_migrate_once
  make_account
  check_replicas
  run_import
  kill_replica
  kill_and_back worker
  run_export
  down_up
  say "the stack's checks took $((SECONDS - start))s"
}

main "$@"
