// Package sdk is sluice's Go SDK for user-defined functions (UDFs): map,
// batch map, streaming map, reduce, streaming reduce, sink, source and
// source-transformer servers that speak Numaflow's gRPC protocol over unix
// sockets, so that sluice (and Numaflow) can run them, as they run UDFs built
// with Numaflow's Go SDK.
//
// # Packages
//
//   - mapper: unary map, one message in, zero or more out (map.sock).
//   - batchmapper: batch map, a whole batch in, answers per message
//     (batchmap.sock).
//   - mapstreamer: streaming map, output messages handed over one by one
//     (mapstream.sock).
//   - reducer: reduce, the messages of one window and keys in, results out
//     once the window ends (reduce.sock).
//   - reducestreamer: streaming reduce, results handed over as they are made
//     (reducestream.sock).
//   - sinker: sink, fallback sink and on-success sink, chosen by
//     NUMAFLOW_UD_CONTAINER_TYPE (sink.sock, fb-sink.sock, ons-sink.sock).
//   - sourcer: source, with read, ack, nack, pending and partitions
//     (source.sock).
//   - sourcetransformer: source transformer, which can also set event
//     times (sourcetransform.sock).
//   - sideinput: side input, a value the runtime asks for on a schedule and
//     hands to vertices as a file (sideinput.sock); and the helpers a UDF
//     reads that file with.
//
// The examples directory has one small program per kind to copy.
//
// # Nacks and user metadata
//
// Besides passing a message on or dropping it, a function can negatively
// acknowledge (nack) it, so that it is delivered again later: mapper,
// batchmapper, mapstreamer and sourcetransformer have MessageToNack, a
// result tagged NackTag ("U+005C__NACK__"), and sinker has ResponseNack,
// status NACK. Both take optional NackOptions (Delay in milliseconds,
// MaxDeliveries, Reason, NackMap) for the runtime's redelivery; when the
// message came from a user-defined source, a sourcer.Sourcer that
// implements sourcer.OptionsNacker gets them with the nacked offsets.
//
// Messages carry user metadata, groups of keys with values of bytes, that
// travel with them from vertex to vertex: Datum.UserMetadata reads the
// input's, in every package but sourcer, and Message.WithUserMetadata sets an
// output's (sourcer's Message too). The runtime does not copy an input's user
// metadata to the outputs: a function passes it on explicitly. UserMetadata is
// one type, re-exported by every package.
//
// The names follow numaflow-go's (MessageToNack, ResponseNack, NackOptions,
// UserMetadata with Groups, Keys, Value, AddKV, RemoveKey, ...) and so does
// the wire encoding.
//
// # What every server does
//
// A server listens on its socket in a directory chosen by, in order, the
// option WithSocketDir, the environment variable SLUICE_UDS_DIR (which
// `vertex run --spawn` sets for the UDF processes it starts) and
// /var/run/numaflow; a stale socket file left by a dead server is removed
// first. Messages up to 64 MiB are accepted and sent. Once it listens, the
// server writes its server-info file, which tells the runtime the protocol
// and versions it speaks (and, for maps, the map mode), and answers IsReady
// with true. Every stream but a reduce stream must start with a handshake
// (handshake{sot: true}), which the server echoes; a stream that does not
// gets InvalidArgument.
//
// Start blocks until its context ends or the process receives SIGTERM or
// SIGINT; it then removes the server-info file, lets open streams finish for
// up to the shutdown timeout (WithShutdownTimeout, 10s by default), stops,
// removes the socket and returns nil. A panic in user code fails the call
// with the gRPC error Internal "UDF_EXECUTION_ERROR(<container>): <panic
// value>" and shuts the server down; Start then returns an error, the
// process should exit, and the runtime reconnects once it has been
// restarted.
package sdk
