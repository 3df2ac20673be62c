#!/bin/sh
# Runs `einsora "$@"` as the einsora user. Compose mounts file secrets as they are on the host
# (their owner and mode can't be set), so each one is copied, owner-only, to where einsora reads
# it (/run/einsora/<name>; EINSORA_DATABASE_URL's password_file names it), then root is dropped.
set -eu
if [ "$(id -u)" = 0 ]; then
  install -d -m 0700 -o einsora -g einsora /run/einsora
  if [ -d /run/secrets ]; then
    for secret in /run/secrets/*; do
      [ -f "$secret" ] || continue
      install -m 0400 -o einsora -g einsora "$secret" "/run/einsora/$(basename "$secret")"
    done
  fi
  HOME=/var/lib/einsora exec setpriv --reuid einsora --regid einsora --init-groups \
    --inh-caps=-all einsora "$@"
fi
exec einsora "$@"
