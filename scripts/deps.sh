#!/usr/bin/env bash
# Installs what the test suite needs when it is missing: redis-server and
# nats-server, and podman, buildah and runc for the container tests, from
# Debian's packages. Without apt-get or root it prints a one-line hint.
set -u

has() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/bin/$1" ] || [ -x "/usr/sbin/$1" ]; }

servers=() containers=()
for c in redis-server nats-server; do has "$c" || servers+=("$c"); done
for c in podman buildah runc; do has "$c" || containers+=("$c"); done
[ ${#servers[@]} -eq 0 ] && [ ${#containers[@]} -eq 0 ] && exit 0

# install PACKAGE... installs with apt-get, updating the package lists once
# if the packages are not found.
updated=
install() {
  [ $# -gt 0 ] || return 0
  command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] || return 1
  echo "installing $*" >&2
  apt-get install -y -qq "$@" >/dev/null 2>&1 && return 0
  [ -z "$updated" ] || return 1
  updated=1
  apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "$@" >/dev/null 2>&1
}

missing=()
install "${servers[@]}" || missing+=("${servers[@]}")
install "${containers[@]}" || missing+=("${containers[@]}")
if [ ${#missing[@]} -gt 0 ]; then
  echo "hint: install ${missing[*]} (Debian: apt-get install ${missing[*]}); tests that need redis-server or nats-server fail without them, the container tests are skipped" >&2
fi
exit 0
