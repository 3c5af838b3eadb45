#!/usr/bin/env bash
# Installs what the test suite needs when it is missing: redis-server and
# nats-server, podman, buildah and runc for the container tests, and
# chromium for the status page's test, from Debian's packages. Without
# apt-get or root it prints a one-line hint.
set -u

missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus) # promtool, for monitoring/'s tests
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing+=(redis-server)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
for c in podman buildah runc; do # test/podman, skipped without them
  command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || missing+=("$c")
done
command -v chromium >/dev/null 2>&1 || missing+=(chromium) # test/page_test.go, skipped without it
[ ${#missing[@]} -eq 0 ] && exit 0

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "installing ${missing[*]}" >&2
  if apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
     { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; }; then
    exit 0
  fi
fi
echo "hint: install ${missing[*]} (Debian: apt-get install ${missing[*]}); tests that need them will fail (podman's and chromium's are skipped) without them" >&2
exit 0
