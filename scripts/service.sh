# Shared by the reliability scripts (fuzz, load, crash-loop): start and stop the real service on
# a data directory of their own, and read its figures. Source it; it defines functions only.

# Starts the service: service_start BINARY DATA_DIR CONFIG_FILE [WORKING_DIR]. Sets
# SERVICE_PID and SERVICE_URL once it serves; its log goes to DATA_DIR.log. New conversations
# work in WORKING_DIR (default: DATA_DIR's parent).
service_start() {
    local binary=$1 data=$2 config=$3 cwd=${4:-$(dirname "$2")}
    mkdir -p "$data"
    : > "$data.log"
    (cd "$cwd" && OPENVAALA_CONFIG=$config OPENVAALA_LOG=${OPENVAALA_LOG:-warn} \
        exec "$binary" serve --addr 127.0.0.1:0 --data-dir "$data") >>"$data.log" 2>&1 &
    SERVICE_PID=$!
    SERVICE_URL=
    for _ in $(seq 1 600); do
        SERVICE_URL=$(sed -n 's/.*serving on \(http:[^ ]*\).*/\1/p' "$data.log" | tail -1)
        [ -n "$SERVICE_URL" ] && return 0
        kill -0 "$SERVICE_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "the service did not start; its log:" >&2
    cat "$data.log" >&2
    return 1
}

# Stops the service the way `openvaala serve stop` does (SIGTERM) and waits for it.
service_stop() {
    kill -TERM "$SERVICE_PID" 2>/dev/null || true
    wait "$SERVICE_PID" 2>/dev/null || true
}

# Kills the service as a crash would.
service_kill9() {
    kill -KILL "$SERVICE_PID" 2>/dev/null || true
    wait "$SERVICE_PID" 2>/dev/null || true
}

# The service's resident memory in KB and its open files, now.
service_rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$SERVICE_PID/status"; }
service_open_files() { ls "/proc/$SERVICE_PID/fd" | wc -l; }

# One field of /api/health (a path such as `answers.total`).
service_health() {
    python3 - "$SERVICE_URL/api/health" "$1" <<'PY'
import json, sys, urllib.request
value = json.load(urllib.request.urlopen(sys.argv[1]))
for key in sys.argv[2].split("."):
    value = value[key]
print(value)
PY
}
