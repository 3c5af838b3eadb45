// Package sessionreducer serves session reduce functions: gRPC service
// sessionreduce.v1.SessionReduce on sessionreduce.sock, server-info file
// sessionreducer-server-info, the wire contract of Numaflow's Go SDK.
//
// # Sessions
//
// The runtime owns the session windows of each key set: it opens a
// session, appends messages, expands it, merges sessions into one and
// closes them, and tells the server each step on one stream. The server
// runs a [SessionReducer] that its [Creator] makes for each session; when
// sessions merge, each ends and hands its Accumulator to a new
// SessionReducer for the merged session, which takes them in with
// MergeAccumulator. When the runtime closes a session, the server sends
// the results of its SessionReduce, then an EOF for the session. The runtime
// gives the results the event time of the session's end less a millisecond.
package sessionreducer
