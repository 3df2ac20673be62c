#!/bin/sh
# The Lab's Postgres: on first start, a cluster whose superuser is `einsora` with the password
# in the file $POSTGRES_PASSWORD_FILE (a compose secret) and a database `einsora`; then the
# server in the foreground, as `postgres`, accepting scram passwords from the compose network.
set -eu
bin=/usr/lib/postgresql/15/bin
data=${PGDATA:-/var/lib/postgresql/data}
secret=${POSTGRES_PASSWORD_FILE:?POSTGRES_PASSWORD_FILE names the password file}
as_postgres() { setpriv --reuid postgres --regid postgres --init-groups "$@"; }
install -d -m 0700 -o postgres -g postgres "$data" /run/postgresql
if [ ! -s "$data/PG_VERSION" ]; then
  # The secret as compose mounts it may not be postgres's to read: a private copy.
  pw=$(mktemp) && install -m 0400 -o postgres -g postgres "$secret" "$pw"
  as_postgres "$bin/initdb" -D "$data" -U einsora --pwfile="$pw" \
    --auth-local=peer --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pw"
  echo "CREATE DATABASE einsora OWNER einsora;" |
    as_postgres "$bin/postgres" --single -D "$data" -c listen_addresses='' postgres >/dev/null
  {
    echo "local all all peer"
    echo "host all all 0.0.0.0/0 scram-sha-256"
    echo "host all all ::/0 scram-sha-256"
  } >"$data/pg_hba.conf"
fi
exec setpriv --reuid postgres --regid postgres --init-groups \
  "$bin/postgres" -D "$data" -c listen_addresses='*' -c unix_socket_directories=/run/postgresql
