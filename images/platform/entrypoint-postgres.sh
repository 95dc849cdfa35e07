#!/bin/sh
# PostgreSQL 15 for the compose deployment: initialises the data directory on first start (the
# password from POSTGRES_PASSWORD, md5 from the deployment's network), then runs the server in front.
set -eu
data=${PGDATA:-/var/lib/postgresql/data}
bin=/usr/lib/postgresql/15/bin
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
user=${POSTGRES_USER:-lemniscate}
db=${POSTGRES_DB:-lemniscate}
mkdir -p "$data" /var/run/postgresql
chown postgres:postgres "$data" /var/run/postgresql
chmod 700 "$data"
if [ ! -s "$data/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
  chown postgres "$pwfile"
  su postgres -s /bin/sh -c "$bin/initdb -D '$data' -U '$user' --pwfile='$pwfile' --auth-local=trust --auth-host=scram-sha-256 -E UTF8 >/dev/null"
  rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$data/pg_hba.conf"
  su postgres -s /bin/sh -c "$bin/pg_ctl -D '$data' -o \"-c listen_addresses=''\" -w start >/dev/null"
  su postgres -s /bin/sh -c "$bin/psql -U '$user' -d postgres -c 'CREATE DATABASE \"$db\"' >/dev/null"
  su postgres -s /bin/sh -c "$bin/pg_ctl -D '$data' -m fast -w stop >/dev/null"
fi
# jit=off: the image does not ship PostgreSQL's LLVM JIT (images/platform/build-offline.sh).
exec su postgres -s /bin/sh -c "exec $bin/postgres -D '$data' -c listen_addresses='*' -c jit=off"
