#!/usr/bin/env bash
# Regenerates the Go code for the UDF wire protocol and KEDA's external scaler
# from pkg/apis/proto/**/*.proto.
# The generated *.pb.go and *_grpc.pb.go files are checked in, so building sluice
# never needs protoc; run this only after editing a .proto file.
#
# Needs: protoc (Debian: apt-get install protobuf-compiler, which also installs the
# well-known types under /usr/include), protoc-gen-go and protoc-gen-go-grpc:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@latest
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@latest
# Override PROTOC or PROTOC_INCLUDE (directory holding google/protobuf/*.proto) if needed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

PROTOC="${PROTOC:-protoc}"
PROTOC_INCLUDE="${PROTOC_INCLUDE:-/usr/include}"

# Plugins installed with `go install` land in GOBIN or GOPATH/bin.
gobin="$(go env GOBIN)"
[[ -n "$gobin" ]] || gobin="$(go env GOPATH)/bin"
export PATH="$gobin:$PATH"

for tool in "$PROTOC" protoc-gen-go protoc-gen-go-grpc; do
	command -v "$tool" >/dev/null || { echo "gen-proto: $tool not found in PATH" >&2; exit 1; }
done

includes=(-I "$root")
if [[ -f "$PROTOC_INCLUDE/google/protobuf/empty.proto" ]]; then
	includes+=(-I "$PROTOC_INCLUDE")
fi

mapfile -t protos < <(find pkg/apis/proto -name '*.proto' | LC_ALL=C sort)
[[ ${#protos[@]} -gt 0 ]] || { echo "gen-proto: no .proto files found" >&2; exit 1; }

# Drop stale output so a removed .proto does not leave its Go code behind.
find pkg/apis/proto -name '*.pb.go' -delete

"$PROTOC" "${includes[@]}" \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	"${protos[@]}"

echo "gen-proto: generated Go code for ${#protos[@]} proto files with $("$PROTOC" --version), $(protoc-gen-go --version), $(protoc-gen-go-grpc --version)"
