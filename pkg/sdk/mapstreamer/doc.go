// Package mapstreamer serves a streaming map user-defined function (UDF)
// over Numaflow's gRPC protocol: for each input message, the function
// hands over its output messages one by one, as they are ready, and the
// server forwards each at once.
//
//	func main() {
//		err := mapstreamer.NewServer(mapstreamer.MapStreamerFunc(words)).Start(context.Background())
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// # Wire
//
// The server listens on the unix socket mapstream.sock and, once it
// listens, writes the server-info file mapper-server-info with MAP_MODE
// stream-map. It serves map.v1.Map: each MapFn stream starts with a
// handshake; then any number of requests may be in flight, each streamed in
// its own goroutine. A request is answered by one response per output
// message, then by a response with status{eot: true}; all carry the
// request's id, and the responses of different requests may interleave.
//
// # Nacks and user metadata
//
// As in package mapper, MapStream may send MessageToNack(opts) to have the
// runtime deliver its input again later; and messages carry user metadata,
// read with Datum.UserMetadata and set with Message.WithUserMetadata (the
// runtime does not pass it from input to output by itself). Every result
// carries a metadata, empty when the message has none; numaflow-go's map
// stream sends none at all, which Numaflow treats the same.
//
// # Socket directory and stopping
//
// As in package mapper: WithSocketDir, else SLUICE_UDS_DIR (set by `vertex
// run --spawn`), else /var/run/numaflow; Start returns after a graceful stop
// on context end, SIGTERM or SIGINT, and a panic becomes the gRPC error
// Internal "UDF_EXECUTION_ERROR(<container>): <panic value>" (<container>
// is NUMAFLOW_UD_CONTAINER_TYPE, or "mapstream") and stops the server.
package mapstreamer
