// Package sourcer serves a user-defined source over Numaflow's gRPC
// protocol: the runtime reads messages from it, acknowledges those it has
// processed, and asks how many are pending and which partitions it has.
//
//	func main() {
//		err := sourcer.NewServer(newQueueSource()).Start(context.Background())
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// # Wire
//
// The server listens on the unix socket source.sock and, once it listens,
// writes the server-info file sourcer-server-info. It serves
// source.v1.Source:
//
//   - ReadFn starts with a handshake, echoed with status{eot: false, code:
//     SUCCESS}; each read request (num_records, timeout_in_ms) is answered
//     by the messages of one Read, then a response with status{eot: true}.
//   - AckFn starts with a handshake; each ack request is answered by a
//     success once Ack has returned.
//   - NackFn, PendingFn and PartitionsFn are unary calls to Nack (or
//     NackWithOptions), Pending and Partitions.
//
// # Nack options and user metadata
//
// A nack from the runtime comes in groups of offsets, each with the nack
// options that the map function, transformer or sink that nacked the
// messages gave (MessageToNack, ResponseNack): a delay before the messages
// are delivered again, a cap on deliveries, a reason and free-form values.
// A Sourcer that implements OptionsNacker gets them, group by group, in
// NackWithOptions; a plain Sourcer gets the offsets alone in Nack.
//
// A message that Read hands out may carry user metadata (Message's
// UserMetadata, or WithUserMetadata): groups of keys with values of bytes
// that travel with it through the pipeline. Every result carries a
// metadata, empty when the message has none, as numaflow-go's do.
//
// # Socket directory and stopping
//
// The socket and the server-info file go to WithSocketDir's directory, else
// to SLUICE_UDS_DIR's (which `vertex run --spawn` sets for the UDF processes
// it starts), else to /var/run/numaflow. Start returns after a graceful
// stop on context end, SIGTERM or SIGINT. A panic in the Sourcer becomes the
// gRPC error Internal "UDF_EXECUTION_ERROR(<container>): <panic value>"
// (<container> is NUMAFLOW_UD_CONTAINER_TYPE, or "source") and stops the
// server.
package sourcer
