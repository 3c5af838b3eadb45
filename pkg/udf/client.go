package udf

import (
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/internal/udsconn"
)

// What the clients of user-defined functions (the packages under pkg/udf
// named after the service they call: mapclient, reduceclient, sourceclient…)
// share: the options of their connection, the errors their calls match, and
// the kinds of server they reach.

// Option configures a client's connection to its server.
type Option = udsconn.Option

// WithCalls makes a client's calls part of calls, which gives them their
// deadline and tells the oldest of them (nil: the default). A vertex hands
// its Calls to the clients its constructors make (vertex.Env.Calls). Without
// it a client's calls have a deadline of their own, 60 s.
var WithCalls = udsconn.WithCalls

// ErrDeadline is matched by the error of a call abandoned because the server
// did not answer it within its deadline.
var ErrDeadline = udsconn.ErrDeadline

// ErrIncompatible is matched by the errors of a server a client cannot talk
// to: a server info that asks for what sluice does not speak, or a
// server-info file that is malformed or cannot be read.
var ErrIncompatible = udsconn.ErrIncompatible

// ErrProtocol is matched by the errors of answers that break the protocol of
// the service a client calls.
var ErrProtocol = udsconn.ErrProtocol

// Kind is a kind of user-defined server, as its server-info file and socket
// name it (map: map.sock, mapper-server-info).
type Kind = serverinfo.Kind

// The kinds of user-defined server.
const (
	// KindMap is a map (map.v1, unary).
	KindMap = serverinfo.KindMap
	// KindBatchMap is a batch map (map.v1).
	KindBatchMap = serverinfo.KindBatchMap
	// KindMapStream is a map stream (map.v1).
	KindMapStream = serverinfo.KindMapStream
	// KindSink is a sink (sink.v1).
	KindSink = serverinfo.KindSink
	// KindFallbackSink is a fallback sink (sink.v1).
	KindFallbackSink = serverinfo.KindFallbackSink
	// KindOnSuccessSink is an on-success sink (sink.v1).
	KindOnSuccessSink = serverinfo.KindOnSuccessSink
	// KindSource is a source (source.v1).
	KindSource = serverinfo.KindSource
	// KindSourceTransformer is a source transformer (sourcetransformer.v1).
	KindSourceTransformer = serverinfo.KindSourceTransformer
	// KindReduce is a reduce (reduce.v1).
	KindReduce = serverinfo.KindReduce
	// KindReduceStream is a reduce stream (reduce.v1).
	KindReduceStream = serverinfo.KindReduceStream
	// KindAccumulator is an accumulator (accumulator.v1).
	KindAccumulator = serverinfo.KindAccumulator
	// KindSessionReduce is a session reduce (sessionreduce.v1).
	KindSessionReduce = serverinfo.KindSessionReduce
	// KindSideInput is a side input (sideinput.v1).
	KindSideInput = serverinfo.KindSideInput
)
