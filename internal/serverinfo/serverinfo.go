// Package serverinfo implements the server-info file handshake between a
// user-defined function (UDF) gRPC server and the runtime that calls it, as
// spoken by Numaflow's Go SDK (numaflow-go v0.12).
//
// A UDF server, before it starts serving, writes a small file next to its
// unix socket: the JSON encoding of a ServerInfo immediately followed by the
// literal text EndMarker (no newline in between or after). The runtime waits
// for that file (Wait), validates it (Check), then polls the service's
// IsReady rpc and opens its streams. Both sides of sluice use this package:
// its SDK servers write the file and its runtime reads it.
//
// Socket and server-info file names depend on the kind of UDF; see Kind.
package serverinfo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ServerInfo is the content of a server-info file.
type ServerInfo struct {
	// Protocol is the transport the server listens on; ProtocolUDS for
	// every server this package deals with.
	Protocol string `json:"protocol"`
	// Language is the SDK's language, LanguageGo for numaflow-go servers.
	Language string `json:"language"`
	// MinimumNumaflowVersion is the oldest Numaflow release the server
	// works with, as a semantic version ("1.4.0-z" style; see Check). It may
	// be empty, in which case no version check applies.
	MinimumNumaflowVersion string `json:"minimum_numaflow_version"`
	// Version is the SDK version the server was built with (may be empty).
	Version string `json:"version"`
	// Metadata carries kind-specific settings, such as MapModeKey for map
	// servers. It is encoded as null when nil, as numaflow-go does.
	Metadata map[string]string `json:"metadata"`
}

// EndMarker terminates a complete server-info file. It is the literal text
// "U+005C__END__" (the code point of a backslash written out, then
// "__END__"), not a backslash character.
const EndMarker = "U+005C__END__"

// Values of ServerInfo.Protocol and ServerInfo.Language.
const (
	ProtocolUDS = "uds"
	ProtocolTCP = "tcp" // used by some SDKs' multi-process mode; not supported by sluice
	LanguageGo  = "go"
)

// MapModeKey is the ServerInfo.Metadata key through which a map server tells
// which of the three map flavours it serves; the values are the MapMode*
// constants. A missing or unknown value means unary map.
const (
	MapModeKey    = "MAP_MODE"
	MapModeUnary  = "unary-map"
	MapModeBatch  = "batch-map"
	MapModeStream = "stream-map"
)

// DefaultDir is where UDF sockets and server-info files live by default.
const DefaultDir = "/var/run/numaflow"

// Socket file names, relative to the socket directory.
const (
	MapSocket               = "map.sock"
	BatchMapSocket          = "batchmap.sock"
	MapStreamSocket         = "mapstream.sock"
	SinkSocket              = "sink.sock"
	FallbackSinkSocket      = "fb-sink.sock"
	OnSuccessSinkSocket     = "ons-sink.sock"
	SourceSocket            = "source.sock"
	SourceTransformerSocket = "sourcetransform.sock"
	ReduceSocket            = "reduce.sock"
	ReduceStreamSocket      = "reducestream.sock"
	AccumulatorSocket       = "accumulator.sock"
	SessionReduceSocket     = "sessionreduce.sock"
	SideInputSocket         = "sideinput.sock"
)

// Server-info file names, relative to the socket directory. The three map
// flavours share MapInfoFile; the metadata says which one is running.
const (
	MapInfoFile               = "mapper-server-info"
	SinkInfoFile              = "sinker-server-info"
	FallbackSinkInfoFile      = "fb-sinker-server-info"
	OnSuccessSinkInfoFile     = "ons-sinker-server-info"
	SourceInfoFile            = "sourcer-server-info"
	SourceTransformerInfoFile = "sourcetransformer-server-info"
	ReduceInfoFile            = "reducer-server-info"
	ReduceStreamInfoFile      = "reducestreamer-server-info"
	AccumulatorInfoFile       = "accumulator-server-info"
	SessionReduceInfoFile     = "sessionreducer-server-info"
	SideInputInfoFile         = "sideinput-server-info"
)

// MaxMessageSize is the gRPC message size limit, for sending and receiving,
// that both the UDF servers and the runtime use (64 MiB).
const MaxMessageSize = 64 << 20

// StreamWindow and ConnWindow are the HTTP/2 flow-control windows, of a
// stream and of a connection, that sluice's UDF clients and SDK servers
// give their peers: fixed windows, large enough for a batch of small
// messages in flight, instead of gRPC's 64 KiB windows that it widens as it
// measures the bandwidth (which costs locks and pings on every message).
const (
	StreamWindow = 4 << 20
	ConnWindow   = 8 << 20
)

// Environment variables the SDK servers read. A sink container learns which
// of the three sink roles it plays from EnvContainerType (see SinkKind).
const (
	EnvContainerType           = "NUMAFLOW_UD_CONTAINER_TYPE"
	EnvReplica                 = "NUMAFLOW_REPLICA"
	ContainerTypeFallbackSink  = "fb-udsink"
	ContainerTypeOnSuccessSink = "ons-udsink"
)

// SDKMinimumNumaflowVersion is the minimum_numaflow_version numaflow-go v0.12
// writes for every kind except batch map (for which it writes nothing).
const SDKMinimumNumaflowVersion = "1.4.0-z"

const (
	defaultWaitPoll    = 100 * time.Millisecond
	serverInfoFileMode = 0o644
)

// SDKCompatVersion is the numaflow-go release whose wire protocol sluice's
// generated code and this package follow.
const SDKCompatVersion = "v0.12.0"

// Kind identifies a kind of UDF server.
type Kind string

// The UDF kinds sluice supports.
const (
	KindMap               Kind = "map"
	KindBatchMap          Kind = "batchmap"
	KindMapStream         Kind = "mapstream"
	KindSink              Kind = "sink"
	KindFallbackSink      Kind = "fb-sink"
	KindOnSuccessSink     Kind = "ons-sink"
	KindSource            Kind = "source"
	KindSourceTransformer Kind = "sourcetransformer"
	KindReduce            Kind = "reduce"
	KindReduceStream      Kind = "reducestream"
	KindAccumulator       Kind = "accumulator"
	KindSessionReduce     Kind = "sessionreducer"
	KindSideInput         Kind = "sideinput"
)

type kindSpec struct {
	socket, infoFile, mapMode, minimumVersion, container string
}

var kinds = map[Kind]kindSpec{
	KindMap:               {MapSocket, MapInfoFile, MapModeUnary, SDKMinimumNumaflowVersion, "udf"},
	KindBatchMap:          {BatchMapSocket, MapInfoFile, MapModeBatch, "", "udf"},
	KindMapStream:         {MapStreamSocket, MapInfoFile, MapModeStream, SDKMinimumNumaflowVersion, "udf"},
	KindSink:              {SinkSocket, SinkInfoFile, "", SDKMinimumNumaflowVersion, "udsink"},
	KindFallbackSink:      {FallbackSinkSocket, FallbackSinkInfoFile, "", SDKMinimumNumaflowVersion, "fb-udsink"},
	KindOnSuccessSink:     {OnSuccessSinkSocket, OnSuccessSinkInfoFile, "", SDKMinimumNumaflowVersion, "ons-udsink"},
	KindSource:            {SourceSocket, SourceInfoFile, "", SDKMinimumNumaflowVersion, "udsource"},
	KindSourceTransformer: {SourceTransformerSocket, SourceTransformerInfoFile, "", SDKMinimumNumaflowVersion, "transformer"},
	KindReduce:            {ReduceSocket, ReduceInfoFile, "", SDKMinimumNumaflowVersion, "udf"},
	KindReduceStream:      {ReduceStreamSocket, ReduceStreamInfoFile, "", SDKMinimumNumaflowVersion, "udf"},
	KindAccumulator:       {AccumulatorSocket, AccumulatorInfoFile, "", SDKMinimumNumaflowVersion, "udf"},
	KindSessionReduce:     {SessionReduceSocket, SessionReduceInfoFile, "", SDKMinimumNumaflowVersion, "udf"},
	KindSideInput:         {SideInputSocket, SideInputInfoFile, "", SDKMinimumNumaflowVersion, "sideinput"},
}

// Kinds lists every supported kind.
func Kinds() []Kind {
	return []Kind{KindMap, KindBatchMap, KindMapStream, KindSink, KindFallbackSink,
		KindOnSuccessSink, KindSource, KindSourceTransformer, KindReduce, KindReduceStream, KindAccumulator,
		KindSessionReduce, KindSideInput}
}

// Container is the role of the user-defined container that serves k, as
// Numaflow's $NUMAFLOW_UD_CONTAINER_TYPE names it: udsource, transformer,
// udf, udsink, fb-udsink, ons-udsink or sideinput.
func (k Kind) Container() string { return kinds[k].container }

// Valid reports whether k is one of the supported kinds.
func (k Kind) Valid() bool {
	_, ok := kinds[k]
	return ok
}

// Socket is the socket file name of the kind ("" for an unknown kind).
func (k Kind) Socket() string { return kinds[k].socket }

// InfoFile is the server-info file name of the kind ("" for an unknown kind).
func (k Kind) InfoFile() string { return kinds[k].infoFile }

// IsMap reports whether k is one of the three map flavours.
func (k Kind) IsMap() bool { return kinds[k].mapMode != "" }

// MapMode returns the MAP_MODE of a map kind (MapModeUnary, MapModeBatch,
// MapModeStream), "" for another kind.
func (k Kind) MapMode() string { return kinds[k].mapMode }

// IsSink reports whether k is one of the three sink roles.
func (k Kind) IsSink() bool {
	return k == KindSink || k == KindFallbackSink || k == KindOnSuccessSink
}

// SinkKind maps the value of EnvContainerType to the sink role it selects:
// ContainerTypeFallbackSink and ContainerTypeOnSuccessSink select those
// roles, anything else the primary sink.
func SinkKind(containerType string) Kind {
	switch containerType {
	case ContainerTypeFallbackSink:
		return KindFallbackSink
	case ContainerTypeOnSuccessSink:
		return KindOnSuccessSink
	default:
		return KindSink
	}
}

// Default returns the ServerInfo a numaflow-go v0.12 server of kind k writes,
// with sdkVersion as its version: protocol "uds", language "go", the minimum
// Numaflow version of that kind, and for maps the MAP_MODE metadata.
func Default(k Kind, sdkVersion string) ServerInfo {
	spec := kinds[k]
	info := ServerInfo{
		Protocol:               ProtocolUDS,
		Language:               LanguageGo,
		MinimumNumaflowVersion: spec.minimumVersion,
		Version:                sdkVersion,
	}
	if spec.mapMode != "" {
		info.Metadata = map[string]string{MapModeKey: spec.mapMode}
	}
	return info
}

// MapKind tells which map flavour a map server's ServerInfo announces;
// like Numaflow, a missing or unknown MAP_MODE means unary map.
func (s ServerInfo) MapKind() Kind {
	switch s.Metadata[MapModeKey] {
	case MapModeBatch:
		return KindBatchMap
	case MapModeStream:
		return KindMapStream
	default:
		return KindMap
	}
}

// ErrIncomplete reports a server-info file that does not (yet) end with
// EndMarker, typically because the server is still writing it.
var ErrIncomplete = errors.New("server-info file is incomplete (end marker missing)")

// ErrMalformed reports a complete server-info file whose JSON does not decode
// into a ServerInfo: a server that wrote it will not write another.
var ErrMalformed = errors.New("malformed server info")

// ErrUnreadable reports a server-info file that is there but cannot be read:
// a directory, or a file this process may not read.
var ErrUnreadable = errors.New("cannot be read")

// maxQuoted is how much of a malformed file an error quotes.
const maxQuoted = 200

// Encode returns the exact bytes of a server-info file: the JSON encoding of
// info immediately followed by EndMarker.
func Encode(info ServerInfo) ([]byte, error) {
	b, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("encoding server info: %w", err)
	}
	return append(b, EndMarker...), nil
}

// Decode parses the content of a server-info file. White space after the end
// marker (a newline an editor or a shell added) is ignored. It returns an error
// wrapping ErrIncomplete if the content does not end with EndMarker, and one
// wrapping ErrMalformed, which says what is wrong and quotes the content, if
// what comes before the marker is not a ServerInfo's JSON.
func Decode(b []byte) (ServerInfo, error) {
	body, ok := strings.CutSuffix(strings.TrimRight(string(b), " \t\r\n"), EndMarker)
	if !ok {
		return ServerInfo{}, ErrIncomplete
	}
	var info ServerInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		quoted := body
		if len(quoted) > maxQuoted {
			quoted = quoted[:maxQuoted] + "..."
		}
		return ServerInfo{}, fmt.Errorf("%w: %w, in %q", ErrMalformed, err, quoted)
	}
	return info, nil
}

// Write writes info to path atomically: the content goes to a temporary file
// in the same directory, which is then renamed over path, so a reader never
// sees a partial file. The file is made world-readable (0644).
func Write(path string, info ServerInfo) (err error) {
	b, err := Encode(info)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing server-info file %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(b); err != nil {
		return fmt.Errorf("writing server-info file %s: %w", path, err)
	}
	if err = f.Chmod(serverInfoFileMode); err != nil {
		return fmt.Errorf("writing server-info file %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("writing server-info file %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing server-info file %s: %w", path, err)
	}
	return nil
}

// Read reads and parses the server-info file at path. The error names the
// file; it wraps fs.ErrNotExist if there is no such file, ErrIncomplete if the
// file does not end with EndMarker (it is still being written), ErrUnreadable
// if the file cannot be read for another reason and ErrMalformed if it is
// not a server-info file.
func Read(path string) (ServerInfo, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ServerInfo{}, fmt.Errorf("reading server-info file: %w", err)
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return ServerInfo{}, fmt.Errorf("server-info file %s %w: %w", path, ErrUnreadable, err)
	}
	info, err := Decode(b)
	if err != nil {
		return ServerInfo{}, fmt.Errorf("server-info file %s: %w", path, err)
	}
	return info, nil
}

// Wait polls the server-info file at path every poll interval (100ms if
// poll <= 0) until it exists and is complete, and returns its content. It
// returns at once, with the parse error, if a complete file is malformed or
// cannot be read for another reason than not existing yet. When ctx ends
// first, the error names the file, wraps ctx.Err() and tells the last
// reason the file was not usable.
func Wait(ctx context.Context, path string, poll time.Duration) (ServerInfo, error) {
	if poll <= 0 {
		poll = defaultWaitPoll
	}
	var timer *time.Timer
	for {
		info, err := Read(path)
		if err == nil {
			return info, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrIncomplete) {
			return ServerInfo{}, err
		}
		if timer == nil {
			timer = time.NewTimer(poll)
			defer timer.Stop()
		} else {
			timer.Reset(poll)
		}
		select {
		case <-ctx.Done():
			return ServerInfo{}, fmt.Errorf("waiting for server-info file %s: %w (last attempt: %v)", path, ctx.Err(), err)
		case <-timer.C:
		}
	}
}

// RuntimeVersion is the Numaflow release whose UDF protocol sluice's runtime
// implements, and the version it compares against a server's
// minimum_numaflow_version. Numaflow 1.8.2 is the first release that carries
// the per-message nack options numaflow-go v0.12 sends (map, sink and source
// transformer results, source NackFn); numaflow-go v0.12 itself asks for at
// least 1.4.0 ("1.4.0-z") for every kind it writes a minimum for.
const RuntimeVersion = "1.8.2"

// Check validates a server's ServerInfo against what sluice's runtime
// supports: the protocol must be "uds", and RuntimeVersion must satisfy the
// server's minimum_numaflow_version under Numaflow's rules (see
// VersionSatisfies). As in Numaflow, an empty minimum_numaflow_version is
// not checked; numaflow-go v0.12 batch map servers write none.
func Check(info ServerInfo) error {
	if info.Protocol != ProtocolUDS {
		return fmt.Errorf("server info declares protocol %q, but sluice's runtime supports only %q", info.Protocol, ProtocolUDS)
	}
	if info.MinimumNumaflowVersion == "" {
		return nil
	}
	ok, err := VersionSatisfies(RuntimeVersion, info.MinimumNumaflowVersion)
	if err != nil {
		return fmt.Errorf("server info declares minimum_numaflow_version %q (SDK %s version %q): %w",
			info.MinimumNumaflowVersion, info.Language, info.Version, err)
	}
	if !ok {
		return fmt.Errorf("UDF server (SDK %s version %q) requires Numaflow %s or later (minimum_numaflow_version %q), "+
			"but sluice's runtime is compatible with Numaflow %s",
			info.Language, info.Version, HumanReadableVersion(info.MinimumNumaflowVersion),
			info.MinimumNumaflowVersion, RuntimeVersion)
	}
	return nil
}
