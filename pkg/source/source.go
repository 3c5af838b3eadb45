// Package source holds the built-in sources — generator, http, nats (core
// NATS, at most once) and jetstream (a JetStream stream, at least once) — and
// the user-defined source reached over gRPC. Every source is an [isb.Reader].
package source
