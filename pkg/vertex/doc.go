// Package vertex runs one replica of a vertex: a MonoVertex, or one vertex of
// a Pipeline, built from a validated config. It is what `vertex run` runs, and
// any Go program can embed it.
//
// # Building
//
// A [Spec] says what the vertex is made of: a source (or the partitions of an
// input buffer), an optional transformer and map, and a sink (or a writer along
// its edges), with its limits and rate limit. [FromMonoVertex] makes the Spec of
// a MonoVertex; package pipeline makes those of a pipeline's vertices. [New]
// wires the parts, the rate limiter and its store (in memory, a fixed count of
// replicas, or Redis), the throttle tracker and the metrics. Options inject the
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
// limiter's pool and closes what it opened. [Vertex.Status] and
// [Vertex.Ready] report on it at any time; serve them as /status and /readyz
// with package observe. A user-defined source is asked every 5s for its
// pending count, the gauge sluice_source_pending.
//
// # Errors
//
// A problem with a field of the config that shows only when the vertex is
// built (a secret that cannot be read, credentials Redis refuses, a TLS
// certificate that does not load) is a [*config.FieldError] naming the field.
package vertex
