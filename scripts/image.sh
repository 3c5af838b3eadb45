#!/usr/bin/env bash
# Builds sluice's container images, FROM scratch, with podman, buildah or
# docker (the first one installed, or $CONTAINER_TOOL). The binaries are built
# on this host (CGO_ENABLED=0, -trimpath) into the build directory, which is
# the build context; nothing is compiled inside an image.
#
#   scripts/image.sh [TARGET...]
#
# TARGET is sluice (the default: the vertex binary, Containerfile), an example
# of pkg/sdk/examples by name (sluice-example-<name>, Containerfile.example),
# examples (every example), all (sluice and every example), or NAME=BINARY: the
# image NAME, whole (IMAGE_PREFIX and TAG do not apply), of a static binary
# built elsewhere for the one platform built (Containerfile.binary). A relative
# BINARY is relative to the working directory.
#
# Environment:
#   PLATFORMS       linux/<arch>,... (default: this host's linux/<arch>). Several
#                   platforms make a manifest list (podman, buildah), one image
#                   per platform; FROM scratch images need no emulation.
#   TAG             the images' tag (default dev)
#   IMAGE_PREFIX    put before each image name, e.g. a registry path ending in /
#   VERSION         stamped into the vertex binary (vertex version) and the
#                   version label (default: git describe --tags --always --dirty)
#   REVISION        the revision label (default: git rev-parse HEAD)
#   BUILD_DIR       the build context (default bin/image)
#   CONTAINER_TOOL  podman, buildah or docker
#   PODMAN_FLAGS    global podman flags (default: --storage-driver vfs --runtime
#                   runc --cgroup-manager cgroupfs, what the project's machines
#                   need); BUILDAH_FLAGS likewise (default: --storage-driver vfs).
#                   Set them empty to use the tool's own configuration.
#   GO              the go command (default go)
set -euo pipefail

here=$PWD
cd "$(dirname "$0")/.."

die() { echo "image.sh: $*" >&2; exit 2; }

GO=${GO:-go}
TAG=${TAG:-dev}
IMAGE_PREFIX=${IMAGE_PREFIX:-}
BUILD_DIR=${BUILD_DIR:-bin/image}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
PLATFORMS=${PLATFORMS:-linux/$($GO env GOARCH)}
PODMAN_FLAGS=${PODMAN_FLAGS-"--storage-driver vfs --runtime runc --cgroup-manager cgroupfs"}
BUILDAH_FLAGS=${BUILDAH_FLAGS-"--storage-driver vfs"}
CA_CERTS=/etc/ssl/certs/ca-certificates.crt

# The tool, and how to call it.
tool=${CONTAINER_TOOL:-}
if [ -z "$tool" ]; then
  for t in podman buildah docker; do
    if command -v "$t" >/dev/null 2>&1; then tool=$t; break; fi
  done
  [ -n "$tool" ] || die "none of podman, buildah or docker is installed (Debian: apt-get install podman buildah runc)"
fi
command -v "$tool" >/dev/null 2>&1 || die "CONTAINER_TOOL ($tool) is not installed"
case $tool in
  podman)  cli=(podman $PODMAN_FLAGS); build=("${cli[@]}" build --layers=false) ;;
  buildah) cli=(buildah $BUILDAH_FLAGS); build=("${cli[@]}" bud --layers=false --isolation chroot) ;;
  docker)  cli=(docker); build=(docker build) ;;
  *) die "CONTAINER_TOOL ($tool): want podman, buildah or docker" ;;
esac
if [ "$tool" = podman ] && [ -z "${CONTAINERS_CONF:-}" ] && [ -n "$PODMAN_FLAGS" ]; then
  # Podman's default ulimits cannot be set on these machines.
  CONTAINERS_CONF=$(mktemp)
  trap 'rm -f "$CONTAINERS_CONF"' EXIT
  printf '[containers]\ndefault_ulimits = []\n' >"$CONTAINERS_CONF"
  export CONTAINERS_CONF
fi

# The platforms, as os/arch pairs.
IFS=, read -r -a platforms <<<"$PLATFORMS"
[ ${#platforms[@]} -gt 0 ] || die "PLATFORMS is empty"
for p in "${platforms[@]}"; do
  [[ $p =~ ^linux/[a-z0-9]+$ ]] || die "PLATFORMS: $p: want linux/<arch> (linux/amd64, linux/arm64, ...)"
done
if [ ${#platforms[@]} -gt 1 ] && [ "$tool" = docker ]; then
  die "PLATFORMS ($PLATFORMS): several platforms make a manifest list, which needs podman or buildah; with docker build one platform at a time"
fi

# The targets.
examples=()
for d in pkg/sdk/examples/*/; do
  [ -f "$d/main.go" ] && examples+=("$(basename "$d")")
done
targets=()
[ $# -gt 0 ] || set -- sluice
for arg in "$@"; do
  case $arg in
    sluice) targets+=(sluice) ;;
    examples) targets+=("${examples[@]}") ;;
    all) targets+=(sluice "${examples[@]}") ;;
    ?*=?*)
      bin=${arg#*=}
      [[ $bin = /* ]] || bin=$here/$bin
      [ -f "$bin" ] || die "target $arg: no binary $bin"
      targets+=("${arg%%=*}=$bin") ;;
    *)
      [ -f "pkg/sdk/examples/$arg/main.go" ] ||
        die "target $arg: want sluice, examples, all or an example (${examples[*]})"
      targets+=("$arg") ;;
  esac
done

for t in "${targets[@]}"; do
  case $t in
    *=*) [ ${#platforms[@]} -eq 1 ] || die "target $t: a binary built elsewhere is for one platform; PLATFORMS ($PLATFORMS) names ${#platforms[@]}" ;;
  esac
done

# binary_path NAME is where a binary built elsewhere for the image NAME goes
# in the build context.
binary_path() { echo "binaries/${1//[^A-Za-z0-9._-]/_}"; }

# The build context: what every image copies, then the binaries.
[ -r "$CA_CERTS" ] || die "$CA_CERTS not found: install ca-certificates"
mkdir -p "$BUILD_DIR"
rm -rf "$BUILD_DIR/rootfs" "$BUILD_DIR/empty" "$BUILD_DIR"/linux-* "$BUILD_DIR/binaries" "$BUILD_DIR/iid"
mkdir -p "$BUILD_DIR/rootfs/etc/ssl/certs" "$BUILD_DIR/rootfs/tmp" "$BUILD_DIR/rootfs/var/run" \
  "$BUILD_DIR/rootfs/home" "$BUILD_DIR/empty"
chmod 1777 "$BUILD_DIR/rootfs/tmp"
cp "$CA_CERTS" "$BUILD_DIR/rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  >"$BUILD_DIR/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$BUILD_DIR/rootfs/etc/group"

gobuild() { # platform output package [ldflags]
  local os=${1%/*} arch=${1#*/}
  mkdir -p "$(dirname "$2")"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -ldflags "-s -w ${4:-}" -o "$2" "$3" ||
    die "go build $3 for $1 failed"
}
for p in "${platforms[@]}"; do
  dir="$BUILD_DIR/${p/\//-}"
  for t in "${targets[@]}"; do
    case $t in
      sluice)
        gobuild "$p" "$dir/sluice/vertex" ./cmd/vertex "-X main.version=$VERSION"
        ln -sf vertex "$dir/sluice/numaflow-rs" ;;
      *=*)
        mkdir -p "$BUILD_DIR/binaries"
        cp "${t#*=}" "$BUILD_DIR/$(binary_path "${t%%=*}")" ;;
      *) gobuild "$p" "$dir/examples/$t" "./pkg/sdk/examples/$t" ;;
    esac
  done
done

# image_size ID prints an image's size.
image_size() {
  case $tool in
    buildah) "${cli[@]}" images --format '{{.Size}}' "$1" ;;
    *) "${cli[@]}" image inspect --format '{{.Size}}' "$1" | awk '{ printf "%.1f MB\n", $1 / 1e6 }' ;;
  esac
}

# release NAME takes NAME off the image or manifest list it stood for, and
# prints the image's ID for rmi_unused.
release() {
  local id
  case $tool in
    podman)
      if "${cli[@]}" manifest exists "$1" 2>/dev/null; then
        "${cli[@]}" manifest rm "$1" >/dev/null
      elif id=$("${cli[@]}" image inspect --format '{{.Id}}' "$1" 2>/dev/null); then
        "${cli[@]}" untag "$id" "$1" && echo "$id"
      fi ;;
    buildah) # no untag: the image goes now, unless a container uses it
      "${cli[@]}" rmi "$1" >/dev/null 2>&1 || true ;;
    docker) # docker build moves the tag
      "${cli[@]}" image inspect --format '{{.Id}}' "$1" 2>/dev/null || true ;;
  esac
}

# rmi_unused ID... removes the images no name or container uses any more, so
# that VFS storage does not keep them.
rmi_unused() {
  local id
  for id in "$@"; do
    "${cli[@]}" rmi "$id" >/dev/null 2>&1 || true
  done
}

# The images: one per platform, named NAME for one platform; for several,
# NAME-<arch> each (TAG-amd64, TAG-arm64, ...) and NAME the manifest list of
# them.
sizes=()
iid=$BUILD_DIR/iid
for t in "${targets[@]}"; do
  case $t in
    sluice) name=${IMAGE_PREFIX}sluice:$TAG file=Containerfile args=() ;;
    *=*)
      name=${t%%=*} file=Containerfile.binary title=${t%%=*}
      [[ ${title##*/} = *:* ]] && title=${title%:*} # without its tag
      args=(--build-arg "BINARY=$(binary_path "$name")" --build-arg "TITLE=$title") ;;
    *) name=${IMAGE_PREFIX}sluice-example-$t:$TAG file=Containerfile.example args=(--build-arg "EXAMPLE=$t") ;;
  esac
  args+=(--build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION")
  old=($(release "$name"))
  ids=()
  for p in "${platforms[@]}"; do
    image=$name
    [ ${#platforms[@]} -gt 1 ] && image=$name-${p#*/}
    old+=($(release "$image"))
    out=(--platform "$p")
    [ "$tool" = docker ] && out=()
    "${build[@]}" -q -f "$file" "${out[@]}" -t "$image" --iidfile "$iid" "${args[@]}" \
      --build-arg "TARGETOS=${p%/*}" --build-arg "TARGETARCH=${p#*/}" "$BUILD_DIR" >/dev/null ||
      die "building $image for $p with $tool failed"
    id=$(cat "$iid")
    ids+=("${id#sha256:}")
    sizes+=("$(printf '%-44s %-12s %s' "$image" "$p" "$(image_size "$id")")")
  done
  if [ ${#platforms[@]} -gt 1 ]; then
    "${cli[@]}" manifest create "$name" >/dev/null
    for id in "${ids[@]}"; do
      "${cli[@]}" manifest add "$name" "containers-storage:$id" >/dev/null ||
        die "adding image $id to the manifest list $name failed"
    done
    sizes+=("$(printf '%-44s %s' "$name" "manifest list of ${PLATFORMS//,/, }")")
  fi
  rmi_unused ${old[@]+"${old[@]}"}
done

echo "built with $tool (version $VERSION):"
printf '  %s\n' "${sizes[@]}"
