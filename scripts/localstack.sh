#!/usr/bin/env bash
# Local AWS stand-ins for fleetbucket: two moto servers on 127.0.0.1, no Docker.
#
#   DynamoDB  single-threaded moto (the threaded one races conditional writes)
#   SQS       threaded moto (long polling blocks a request thread)
#   Secrets Manager  the same threaded moto server as SQS
#                    (AWS_ENDPOINT_URL_SECRETS_MANAGER)
#
# Usage:
#   eval "$(scripts/localstack.sh start)"   start (or reuse) the stack, print its env
#   eval "$(scripts/localstack.sh env)"     print the env of the running stack
#   scripts/localstack.sh status            show PIDs, ports, health (exit 1 if not up)
#   scripts/localstack.sh stop              stop both servers (by PID)
#
# Only the export lines go to stdout; everything else goes to stderr.
#
# Environment:
#   FLEETBUCKET_DYNAMODB_PORT, FLEETBUCKET_SQS_PORT  fixed ports (default: free ports)
#   FLEETBUCKET_TABLE           limiter table to create (default: fleetbucket)
#   FLEETBUCKET_STACK_TIMEOUT   seconds to wait for readiness (default: 20)
#   FLEETBUCKET_STACK_LOG_REQUESTS=1  log every request in .local/stack/*.log
#   FLEETBUCKET_PYTHON          python interpreter with moto[server] (default: python3,
#                               or .tools/venv, which start creates if moto is missing)
#
# State lives in .local/stack/ at the repository root: dynamodb.pid, sqs.pid,
# *.port, *.log and env.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd -P)
STACK_DIR=$ROOT/.local/stack
ENV_FILE=$STACK_DIR/env
LAUNCHER=$SCRIPT_DIR/moto_server.py
VENV=$ROOT/.tools/venv
MOTO_SPEC=${FLEETBUCKET_MOTO_SPEC:-moto[server]==5.2.1}
TABLE=${FLEETBUCKET_TABLE:-fleetbucket}
READY_TIMEOUT=${FLEETBUCKET_STACK_TIMEOUT:-20}
SERVERS=(dynamodb sqs)

log() { printf 'localstack: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p;}' "${BASH_SOURCE[0]}" >&2
}

# ---------------------------------------------------------------- python ----

# Helper run by the chosen interpreter: readiness, health, table, port checks.
read -r -d '' PYHELPER <<'PY' || true
import os, socket, sys, time

# Hermetic AWS client set-up: dummy credentials, no profile or config file,
# and never a proxy for the loopback servers.
for k in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
    os.environ.pop(k, None)
os.environ["AWS_CONFIG_FILE"] = os.devnull
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
for k in ("NO_PROXY", "no_proxy"):
    os.environ[k] = ",".join(filter(None, ["127.0.0.1,localhost", os.environ.get(k)]))


def client(kind, port, read_timeout=5):
    import boto3
    from botocore.config import Config
    return boto3.client(
        kind, endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
        aws_access_key_id="test", aws_secret_access_key="test",
        config=Config(connect_timeout=1, read_timeout=read_timeout,
                      retries={"max_attempts": 1, "mode": "standard"}))


def probe(c, kind):
    if kind == "dynamodb":
        c.list_tables(Limit=1)
    else:
        c.list_queues()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def cmd_wait(timeout, *specs):
    # spec: kind:pid:portfile
    pending = {}
    for s in specs:
        kind, pid, portfile = s.split(":", 2)
        pending[kind] = [int(pid), portfile, None, None]  # pid, portfile, port, client
    deadline = time.monotonic() + float(timeout)
    last_err = {}
    while pending:
        for kind in list(pending):
            st = pending[kind]
            pid, portfile = st[0], st[1]
            if not alive(pid):
                print(f"{kind} server (pid {pid}) exited before it was ready", file=sys.stderr)
                return 1
            if st[2] is None:
                try:
                    with open(portfile) as f:
                        st[2] = int(f.read().strip())
                except (OSError, ValueError):
                    continue
                st[3] = client(kind, st[2])
            try:
                probe(st[3], kind)
            except Exception as e:  # not ready yet
                last_err[kind] = f"{type(e).__name__}: {e}"
                continue
            del pending[kind]
        if not pending:
            return 0
        if time.monotonic() > deadline:
            for kind, st in pending.items():
                where = f"port {st[2]}" if st[2] else "no port bound yet"
                print(f"{kind} server (pid {st[0]}, {where}) not ready after {timeout} s"
                      f" (last error: {last_err.get(kind, 'none')})", file=sys.stderr)
            return 1
        time.sleep(0.05)
    return 0


def cmd_ping(*specs):
    # spec: kind:port; succeeds if every server answers
    for s in specs:
        kind, port = s.split(":", 1)
        try:
            probe(client(kind, int(port), read_timeout=5), kind)
        except Exception:
            return 1
    return 0


def cmd_table(port, name):
    c = client("dynamodb", int(port))
    try:
        c.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST")
        print(f"localstack: created table {name}", file=sys.stderr)
    except c.exceptions.ResourceInUseException:
        pass
    t = c.describe_table(TableName=name)["Table"]
    ks = [(k["AttributeName"], k["KeyType"]) for k in t["KeySchema"]]
    if ks != [("pk", "HASH")]:
        print(f"table {name} exists with key schema {ks}, want pk (HASH, S)", file=sys.stderr)
        return 1
    ttl = c.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    status, attr = ttl.get("TimeToLiveStatus"), ttl.get("AttributeName")
    if status in ("ENABLED", "ENABLING"):
        if attr != "ttl":
            print(f"table {name} has TTL on {attr!r}, want 'ttl'", file=sys.stderr)
            return 1
        return 0
    c.update_time_to_live(TableName=name, TimeToLiveSpecification={
        "Enabled": True, "AttributeName": "ttl"})
    print(f"localstack: enabled TTL on {name}.ttl", file=sys.stderr)
    return 0


def cmd_portfree(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", int(port)))
        return 0
    except OSError:
        return 1
    finally:
        s.close()


cmd, args = sys.argv[1], sys.argv[2:]
sys.exit({"wait": cmd_wait, "ping": cmd_ping, "table": cmd_table,
          "portfree": cmd_portfree}[cmd](*args))
PY

PY=""

has_moto() {
	"$1" -c 'import importlib.util as u, sys
sys.exit(0 if all(u.find_spec(m) for m in ("moto", "flask", "flask_cors", "werkzeug", "boto3")) else 1)' \
		>/dev/null 2>&1
}

# Pick (or install) the interpreter, resolved to its real path so the PIDs we
# record are the python processes themselves (not e.g. a pyenv shim).
find_python() {
	local cand
	for cand in "${FLEETBUCKET_PYTHON:-}" python3 "$VENV/bin/python"; do
		[[ -n $cand ]] || continue
		command -v "$cand" >/dev/null 2>&1 || continue
		if has_moto "$cand"; then
			PY=$("$cand" -c 'import sys; print(sys.executable)')
			return 0
		fi
	done
	return 1
}

need_python() {
	[[ -n $PY ]] && return 0
	find_python && return 0
	[[ ${1:-} == install ]] || die "moto is not importable (run: scripts/localstack.sh start, which installs it)"
	command -v python3 >/dev/null 2>&1 || die "python3 not found; install Python 3 first"
	log "moto is not importable by python3; installing $MOTO_SPEC into $VENV"
	log "+ python3 -m venv $VENV"
	python3 -m venv "$VENV" >&2 ||
		die "could not create $VENV (on Debian/Ubuntu: apt-get install python3-venv), or pip install \"moto[server]\" yourself"
	log "+ $VENV/bin/python -m pip install \"$MOTO_SPEC\""
	"$VENV/bin/python" -m pip install --disable-pip-version-check "$MOTO_SPEC" >&2 ||
		die "pip install \"$MOTO_SPEC\" failed"
	has_moto "$VENV/bin/python" || die "moto still not importable after installing it into $VENV"
	PY=$("$VENV/bin/python" -c 'import sys; print(sys.executable)')
	log "using $PY"
}

pyhelper() { "$PY" -c "$PYHELPER" "$@"; }

# --------------------------------------------------------------- process ----

# alive PID: the process exists and is not a zombie.
alive() {
	[[ ${1:-} =~ ^[0-9]+$ ]] || return 1
	kill -0 "$1" 2>/dev/null || return 1
	local stat
	stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $stat != Z* ]]
}

# ours PID: alive and running our launcher (guards against a recycled PID).
ours() {
	alive "${1:-}" || return 1
	local args
	args=$(ps -ww -o args= -p "$1" 2>/dev/null) || return 1
	[[ $args == *"$LAUNCHER"* ]]
}

digits_of() { if [[ -f $1 ]]; then tr -dc '0-9' <"$1"; fi; }
read_pid() { digits_of "$STACK_DIR/$1.pid"; }
read_port() { digits_of "$STACK_DIR/$1.port"; }

# kill_pid PID NAME: TERM, wait up to 10 s, then KILL. Only our launcher.
kill_pid() {
	local pid=$1 name=$2 i
	ours "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || {
			log "stopped $name (pid $pid)"
			return 0
		}
		sleep 0.1
	done
	log "$name (pid $pid) ignored TERM for 10 s; sending KILL"
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		alive "$pid" || return 0
		sleep 0.1
	done
	log "warning: $name (pid $pid) is still alive after KILL"
	return 1
}

stop_server() {
	local name=$1 pid
	pid=$(read_pid "$name")
	if [[ -n $pid ]]; then
		if ours "$pid"; then
			kill_pid "$pid" "$name"
		else
			log "$name: pid $pid is not running (stale pid file)"
		fi
	fi
	rm -f "$STACK_DIR/$name.pid" "$STACK_DIR/$name.port"
}

lock() {
	mkdir -p "$STACK_DIR"
	command -v flock >/dev/null 2>&1 || return 0
	exec 9>"$STACK_DIR/lock"
	flock -w 60 9 || die "another localstack.sh holds $STACK_DIR/lock"
}

# ----------------------------------------------------------------- start ----

check_port_var() { # VAR VALUE
	[[ -z $2 ]] && return 0
	if ! [[ $2 =~ ^[0-9]+$ ]] || ((10#$2 < 1 || 10#$2 > 65535)); then
		die "$1=$2 is not a port number"
	fi
}

write_env() { # DYNAMODB_PORT SQS_PORT
	local tmp=$ENV_FILE.tmp.$$
	{
		printf 'export AWS_ENDPOINT_URL_DYNAMODB=%s\n' "http://127.0.0.1:$1"
		printf 'export AWS_ENDPOINT_URL_SQS=%s\n' "http://127.0.0.1:$2"
		printf 'export AWS_ENDPOINT_URL_SECRETS_MANAGER=%s\n' "http://127.0.0.1:$2"
		printf 'export AWS_ACCESS_KEY_ID=test\n'
		printf 'export AWS_SECRET_ACCESS_KEY=test\n'
		printf 'export AWS_REGION=us-east-1\n'
		printf 'export AWS_DEFAULT_REGION=us-east-1\n'
		printf 'export FLEETBUCKET_TABLE=%s\n' "$TABLE"
		# The interpreter this stack runs on, so that tests starting a
		# private moto (test/emulator.StartMoto) use the same one.
		[[ -n $PY ]] && printf 'export FLEETBUCKET_PYTHON=%q\n' "$PY"
	} >"$tmp"
	mv -f "$tmp" "$ENV_FILE"
}

# Set by start; cleaned up by on_start_exit unless the start completed.
STARTED_PIDS=()
STARTED_NAMES=()
START_OK=0

on_start_exit() {
	local rc=$?
	((START_OK)) && return 0
	local i
	for i in "${!STARTED_PIDS[@]}"; do
		kill_pid "${STARTED_PIDS[i]}" "${STARTED_NAMES[i]}" || true
	done
	if ((${#STARTED_PIDS[@]})); then
		rm -f "$STACK_DIR"/{dynamodb,sqs}.{pid,port} "$ENV_FILE"
	fi
	((rc)) || rc=1
	exit "$rc"
}

show_logs() {
	local name
	for name in "${SERVERS[@]}"; do
		[[ -f $STACK_DIR/$name.log ]] || continue
		if [[ ! -s $STACK_DIR/$name.log ]]; then
			log "---- $STACK_DIR/$name.log is empty ----"
			continue
		fi
		log "---- tail of $STACK_DIR/$name.log ----"
		tail -n 25 "$STACK_DIR/$name.log" >&2
	done
}

# launch NAME MODE PORT: start one launcher in the background, record its PID.
launch() {
	local name=$1 mode=$2 port=$3 extra=()
	[[ ${FLEETBUCKET_STACK_LOG_REQUESTS:-0} == 1 ]] && extra+=(--log-requests)
	rm -f "$STACK_DIR/$name.port"
	"$PY" -u "$LAUNCHER" --host 127.0.0.1 --port "$port" "$mode" \
		--port-file "$STACK_DIR/$name.port" "${extra[@]}" \
		</dev/null >"$STACK_DIR/$name.log" 2>&1 9>&- &
	local pid=$!
	STARTED_PIDS+=("$pid")
	STARTED_NAMES+=("$name")
	echo "$pid" >"$STACK_DIR/$name.pid"
}

cmd_start() {
	local want_d=${FLEETBUCKET_DYNAMODB_PORT:-} want_s=${FLEETBUCKET_SQS_PORT:-}
	check_port_var FLEETBUCKET_DYNAMODB_PORT "$want_d"
	check_port_var FLEETBUCKET_SQS_PORT "$want_s"
	[[ -n $want_d && $want_d == "$want_s" ]] &&
		die "FLEETBUCKET_DYNAMODB_PORT and FLEETBUCKET_SQS_PORT are both $want_d; they need two ports"
	[[ $TABLE =~ ^[A-Za-z0-9_.-]{3,255}$ ]] ||
		die "FLEETBUCKET_TABLE=$TABLE is not a valid DynamoDB table name"
	[[ $READY_TIMEOUT =~ ^[0-9]+$ ]] || die "FLEETBUCKET_STACK_TIMEOUT=$READY_TIMEOUT is not a number of seconds"

	need_python install
	lock
	local t0=${EPOCHREALTIME:-$SECONDS}
	t0=${t0/,/.} # some locales print a decimal comma

	# Reuse a running stack when both servers are ours and answer.
	local dpid spid dport sport
	dpid=$(read_pid dynamodb) spid=$(read_pid sqs)
	dport=$(read_port dynamodb) sport=$(read_port sqs)
	if ours "$dpid" && ours "$spid" && [[ -n $dport && -n $sport ]] &&
		pyhelper ping "dynamodb:$dport" "sqs:$sport"; then
		[[ -z $want_d || $want_d == "$dport" ]] ||
			die "stack already running with DynamoDB on port $dport, not $want_d (run: scripts/localstack.sh stop)"
		[[ -z $want_s || $want_s == "$sport" ]] ||
			die "stack already running with SQS on port $sport, not $want_s (run: scripts/localstack.sh stop)"
		pyhelper table "$dport" "$TABLE" || die "could not set up table $TABLE"
		write_env "$dport" "$sport"
		log "reusing running stack: DynamoDB pid $dpid on 127.0.0.1:$dport, SQS pid $spid on 127.0.0.1:$sport"
		cat "$ENV_FILE"
		return 0
	fi

	# Anything left over (one server dead, or alive but not answering): stop it.
	local name
	if [[ -n $dpid || -n $spid ]]; then
		log "the previous stack is incomplete or not answering; restarting it"
	fi
	for name in "${SERVERS[@]}"; do
		stop_server "$name"
	done
	rm -f "$ENV_FILE"

	# Requested ports must be free before we start anything.
	local var port
	for var in FLEETBUCKET_DYNAMODB_PORT FLEETBUCKET_SQS_PORT; do
		port=${!var:-}
		[[ -z $port ]] && continue
		pyhelper portfree "$port" ||
			die "port $port on 127.0.0.1 ($var) is already in use; free it or choose another port"
	done

	trap on_start_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	launch dynamodb --single-threaded "${want_d:-0}"
	launch sqs --threaded "${want_s:-0}"

	if ! pyhelper wait "$READY_TIMEOUT" \
		"dynamodb:${STARTED_PIDS[0]}:$STACK_DIR/dynamodb.port" \
		"sqs:${STARTED_PIDS[1]}:$STACK_DIR/sqs.port"; then
		show_logs
		log "start failed; stopping what was started"
		exit 1
	fi

	dport=$(read_port dynamodb) sport=$(read_port sqs)
	if ! pyhelper table "$dport" "$TABLE"; then
		show_logs
		die "could not create table $TABLE"
	fi
	write_env "$dport" "$sport"
	START_OK=1
	trap - EXIT INT TERM

	local t1=${EPOCHREALTIME:-$SECONDS}
	t1=${t1/,/.}
	log "started in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s: DynamoDB (single-threaded) pid ${STARTED_PIDS[0]} on 127.0.0.1:$dport," \
		"SQS (threaded) pid ${STARTED_PIDS[1]} on 127.0.0.1:$sport; table $TABLE; logs in $STACK_DIR"
	cat "$ENV_FILE"
}

# ------------------------------------------------------- stop/env/status ----

cmd_stop() {
	lock
	local name any=0
	for name in "${SERVERS[@]}"; do
		[[ -f $STACK_DIR/$name.pid ]] && any=1
		stop_server "$name"
	done
	rm -f "$ENV_FILE"
	((any)) || log "not running"
}

cmd_env() {
	[[ -f $ENV_FILE ]] || die "stack is not running (run: scripts/localstack.sh start)"
	local name
	for name in "${SERVERS[@]}"; do
		ours "$(read_pid "$name")" || log "warning: the $name server is not running (run: scripts/localstack.sh start)"
	done
	cat "$ENV_FILE"
}

cmd_status() {
	local name pid port ok=1 kind
	for name in "${SERVERS[@]}"; do
		pid=$(read_pid "$name") port=$(read_port "$name")
		[[ $name == dynamodb ]] && kind="single-threaded" || kind="threaded"
		if [[ -z $pid ]]; then
			echo "$name: stopped"
			ok=0
		elif ! ours "$pid"; then
			echo "$name: dead (stale pid $pid)"
			ok=0
		elif [[ -z $port ]]; then
			echo "$name: pid $pid, no port bound"
			ok=0
		elif [[ -z $PY ]] && ! find_python; then
			echo "$name: pid $pid ($kind) on http://127.0.0.1:$port, health unknown (no python with moto)"
			ok=0
		elif pyhelper ping "$name:$port"; then
			echo "$name: running, pid $pid ($kind) on http://127.0.0.1:$port"
		else
			echo "$name: pid $pid ($kind) on http://127.0.0.1:$port, NOT answering"
			ok=0
		fi
	done
	((ok)) && [[ -f $ENV_FILE ]] && echo "env: $ENV_FILE"
	((ok))
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
status) cmd_status ;;
-h | --help | help)
	usage
	;;
*)
	usage
	exit 2
	;;
esac
