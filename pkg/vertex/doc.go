// Package vertex runs one replica of a vertex: a MonoVertex, or one vertex of
// a Pipeline. It is what `vertex run` runs, and any Go program can embed it.
// It knows no YAML: it is built from Go values.
//
// # Building
//
// A [Spec] says what the vertex is made of: the constructors of a source (or
// the partitions of an input buffer), an optional transformer and map, and a
// sink and fallback sink (or a writer along its edges), with its [Limits], its
// [RateLimit] (a ratelimit.Config, where the replicas share it, a per-key
// limit) and its retry policy. Package vertexconfig makes the Spec of a
// MonoVertex or of a pipeline vertex from a config; a Go program may write
// one (see the example). [New] calls the constructors with an [Env], wires the
// parts, the rate limiter and its store (the replica alone, a fixed count of
// replicas, or a shared store such as Redis), the throttle tracker and the
// metrics. Options inject the
// logger, the Prometheus Registerer, the tracer, the clock, the replica's index
// and the directory of the user-defined containers' sockets.
//
// # Running
//
// [Vertex.Run] connects to the user-defined servers, waiting until they are
// up (creating their socket directory when it is missing, and naming the
// server-info file it waits for in the log and in Ready), and forwards: one forwarder per input, each a loop of acquire tokens,
// read at most that many messages, give back the unused tokens, transform, map,
// write and ack. When its context ends the vertex stops reading, writes and
// acks what it has read (for at most readTimeout + 5s), leaves its rate
// limit's replica set and closes what it opened. [Vertex.Status] and
// [Vertex.Ready] report on it at any time; serve them as /status and /readyz
// with package observe. A user-defined source is asked every 5s for its
// pending count, the gauge sluice_source_pending.
//
// # Errors
//
// New returns the errors of the constructors as they are: those package
// vertexconfig makes name the field of the config at fault (a secret that
// cannot be read, credentials Redis refuses, a TLS certificate that does not
// load) as a config.FieldError.
package vertex
