#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests, from Debian's `postgresql`
# package: a temporary directory, a free loopback port, no TLS, trust auth
# on loopback only.
#
#   tests/pg/cluster.sh start DIR   initdb + start; prints the URL
#   tests/pg/cluster.sh url DIR     prints the URL of a started cluster
#   tests/pg/cluster.sh stop DIR    stops it and removes DIR
#
# initdb refuses to run as root: as root, the server runs as the `postgres`
# user the package creates (DIR is chowned to it).
set -euo pipefail

cmd=${1:?usage: cluster.sh start|url|stop DIR}
dir=${2:?usage: cluster.sh start|url|stop DIR}

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
[ -n "$bin" ] && [ -x "$bin/initdb" ] || {
    echo "cluster.sh: no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)" >&2
    exit 1
}

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

case "$cmd" in
start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || { echo "cluster.sh: no postgres user (apt-get install postgresql)" >&2; exit 1; }
        chown postgres: "$dir"
        chmod 700 "$dir"
        runuser -u postgres -- test -x "$dir" || {
            echo "cluster.sh: user postgres cannot reach $dir (make its parents world-searchable, chmod o+x)" >&2
            exit 1
        }
    fi
    port=$(free_port)
    as_owner "$bin/initdb" -D "$dir/data" -U wf --auth=trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }
    # Loopback only; the socket lives in DIR, not /var/run/postgresql.
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null || {
        cat "$dir/server.log" >&2
        exit 1
    }
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U wf wf
    echo "postgres://wf@127.0.0.1:$port/wf" >"$dir/url"
    cat "$dir/url"
    ;;
url)
    cat "$dir/url"
    ;;
stop)
    if [ -d "$dir/data" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: cluster.sh start|url|stop DIR" >&2
    exit 2
    ;;
esac
