// Package sinker serves a user-defined sink over Numaflow's gRPC protocol:
// the sink gets batches of messages to write and answers, per message,
// whether it was written, failed (to be retried), is to go to the fallback
// sink, or is nacked (given back to be read again later).
//
//	func main() {
//		err := sinker.NewServer(sinker.SinkerFunc(write)).Start(context.Background())
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// # Wire
//
// The server serves sink.v1.Sink on the unix socket of its role, chosen by
// the environment variable NUMAFLOW_UD_CONTAINER_TYPE: sink.sock (with
// server-info file sinker-server-info) by default, fb-sink.sock
// (fb-sinker-server-info) for "fb-udsink", ons-sink.sock
// (ons-sinker-server-info) for "ons-udsink". It writes the server-info file
// once it listens. Each SinkFn stream starts with a handshake; then the
// runtime sends batches, each a run of requests followed by a request with
// status{eot: true}. The server answers a batch with one response holding a
// result per request, in the order of the requests, then a response with
// status{eot: true}; the stream carries batch after batch.
//
// # Nacks and user metadata
//
// ResponseNack(id, opts) answers a message with status NACK and, when opts
// is not nil, nack_options: the runtime gives the message back, to be
// delivered again as opts say (after opts.Delay milliseconds, say).
// Datum.UserMetadata is the user metadata that functions upstream attached
// to the message (the headers meant for the sink's target, say).
//
// # On-success sink
//
// ResponseOnSuccess(id) answers status ON_SUCCESS: the message was written,
// and the runtime writes it to the vertex's on-success sink (sink.onSuccess)
// too. ResponseOnSuccessMessage(id, msg) sends on_success_msg as well: the
// runtime writes msg's value and keys in place of the input's, with msg's
// user metadata, or the input's when msg has none.
//
// # Socket directory and stopping
//
// The socket and the server-info file go to WithSocketDir's directory, else
// to SLUICE_UDS_DIR's (which `vertex run --spawn` sets for the UDF processes
// it starts), else to /var/run/numaflow. Start returns after a graceful
// stop on context end, SIGTERM or SIGINT. A panic in Sink becomes the gRPC
// error Internal "UDF_EXECUTION_ERROR(<container>): <panic value>"
// (<container> is NUMAFLOW_UD_CONTAINER_TYPE, or the role: "sink",
// "fb-sink", "ons-sink") and stops the server.
package sinker
