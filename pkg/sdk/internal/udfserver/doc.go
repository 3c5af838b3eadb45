// Package udfserver is the plumbing every SDK server shares: the socket
// directory and options, listening on a unix socket, the server-info file,
// signals and graceful stop, turning a panic in user code into a gRPC error
// that shuts the server down, the start-of-transmission handshake, and the
// two shapes of stream the protocol uses (many requests answered
// concurrently, and batches ended by an end-of-transmission marker).
//
// The public packages (mapper, sinker, sourcer, ...) register their gRPC
// service on a Server and call its Run from their Start.
package udfserver
