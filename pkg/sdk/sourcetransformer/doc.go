// Package sourcetransformer serves a source transformer over Numaflow's
// gRPC protocol: a function applied to every message of a source as it is
// read, typically to assign event times (which the watermark follows) or
// to filter early.
//
//	func main() {
//		err := sourcetransformer.NewServer(sourcetransformer.SourceTransformerFunc(stamp)).Start(context.Background())
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// # Wire
//
// The server listens on the unix socket sourcetransform.sock and, once it
// listens, writes the server-info file sourcetransformer-server-info. It
// serves sourcetransformer.v1.SourceTransform: each SourceTransformFn
// stream starts with a handshake; then any number of requests may be in
// flight; each is transformed concurrently with the others (quick ones by
// the goroutine that receives them, one after the other, slow ones each in
// a goroutine of its own) and answered, as soon as it is done, with a
// response that carries its id. A zero event time in a
// Message is sent as no event time.
//
// # Nacks and user metadata
//
// A transformer can negatively acknowledge (nack) a message instead of
// passing it on: Messages{MessageToNack(d.EventTime(), opts)} asks the
// runtime to have the source deliver it again, as opts say (nil: the
// runtime's defaults). On the wire, the result carries the tag NackTag
// ("U+005C__NACK__") and, with opts, nack_options.
// Messages{MessageToFail(d.EventTime())}, a result tagged FailTag
// ("U+005C__FAIL__"), fails the message instead: the runtime calls the
// transformer with it again as source.transformer.retryStrategy says.
//
// Messages carry user metadata, groups of keys with values of bytes that
// travel with them through the pipeline: Datum.UserMetadata is the input's
// (a copy to change at will), Message.WithUserMetadata sets an output's.
// The runtime does not pass the input's on by itself. Every result carries
// a metadata, empty when the message has no user metadata, as numaflow-go's
// do.
//
// # Socket directory and stopping
//
// The socket and the server-info file go to WithSocketDir's directory, else
// to SLUICE_UDS_DIR's (which `vertex run --spawn` sets for the UDF processes
// it starts), else to /var/run/numaflow. Start returns after a graceful
// stop on context end, SIGTERM or SIGINT. A panic in Transform becomes the
// gRPC error Internal "UDF_EXECUTION_ERROR(<container>): <panic value>"
// (<container> is NUMAFLOW_UD_CONTAINER_TYPE, or "sourcetransformer") and
// stops the server.
package sourcetransformer
