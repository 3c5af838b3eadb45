// Package sink holds the built-in sinks (log, blackhole), the user-defined sink
// over gRPC with its fallback, and the adapter that writes a vertex's output to
// the ISB.
package sink
