#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests, from Debian's `postgresql`
# package: a temporary directory, a free loopback port, trust auth on
# loopback only, and TLS offered (not required) with a self-signed
# certificate for 127.0.0.1 made here (openssl).
#
#   tests/pg/cluster.sh start DIR   initdb + start; prints the URL
#   tests/pg/cluster.sh url DIR     prints the URL of a started cluster
#   tests/pg/cluster.sh ca DIR      prints the certificate to trust for TLS
#   tests/pg/cluster.sh stop DIR    stops it and removes DIR
#   tests/pg/cluster.sh down DIR    stops the server, keeps DIR (an outage)
#   tests/pg/cluster.sh up DIR      starts it again on the same port
#
# initdb refuses to run as root: as root, the server runs as the `postgres`
# user the package creates (DIR is chowned to it).
set -euo pipefail

cmd=${1:?usage: cluster.sh start|url|ca|stop|down|up DIR}
dir=${2:?usage: cluster.sh start|url|ca|stop|down|up DIR}

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

# Loopback only; the socket lives in DIR, not /var/run/postgresql.
serve() {
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $1 -k $dir -c fsync=off -c max_connections=200 -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key" start >/dev/null || {
        cat "$dir/server.log" >&2
        exit 1
    }
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
    # A CA of its own signs the server's certificate; clients trust `ca DIR`.
    tls="$dir/tls"
    mkdir -p "$tls"
    {
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=wf test CA" \
            -keyout "$tls/ca.key" -out "$dir/ca.pem" &&
            openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
                -keyout "$dir/data/server.key" -out "$tls/server.csr" &&
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$tls/ext" &&
            openssl x509 -req -in "$tls/server.csr" -CA "$dir/ca.pem" -CAkey "$tls/ca.key" \
                -CAcreateserial -days 2 -extfile "$tls/ext" -out "$dir/data/server.crt"
    } >"$tls/openssl.log" 2>&1 || {
        cat "$tls/openssl.log" >&2
        echo "cluster.sh: openssl could not make the certificates" >&2
        exit 1
    }
    chmod 600 "$dir/data/server.key"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$dir/data/server.key" "$dir/data/server.crt"; fi
    chmod 644 "$dir/ca.pem"
    echo "$port" >"$dir/port"
    serve "$port"
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U wf wf
    echo "postgres://wf@127.0.0.1:$port/wf" >"$dir/url"
    cat "$dir/url"
    ;;
url)
    cat "$dir/url"
    ;;
ca)
    echo "$dir/ca.pem"
    ;;
down)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
up)
    serve "$(cat "$dir/port")"
    ;;
stop)
    if [ -d "$dir/data" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: cluster.sh start|url|ca|stop|down|up DIR" >&2
    exit 2
    ;;
esac
