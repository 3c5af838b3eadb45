// Package reducestreamer serves a streaming reduce user-defined function
// (UDF) over Numaflow's gRPC protocol: the function gets the messages of one
// window and keys on a channel and hands its results over on another as it
// makes them, and the server sends each at once, before the window ends if
// the function says so.
//
//	func main() {
//		err := reducestreamer.NewServer(reducestreamer.ReduceStreamerFunc(countByTens)).Start(context.Background())
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// # Wire
//
// The server listens on the unix socket reducestream.sock and, once it
// listens, writes the server-info file reducestreamer-server-info. It serves
// reduce.v1.Reduce as package reducer does (no handshake; OPEN, then APPEND,
// per window and keys; the client ends the windows by half-closing the
// stream; a last response with EOF set), except that each result goes out as
// soon as ReduceStream hands it over.
//
// # Socket directory and stopping
//
// As in package mapper: WithSocketDir, else SLUICE_UDS_DIR (set by `vertex
// run --spawn`), else /var/run/numaflow; Start returns after a graceful stop
// on context end, SIGTERM or SIGINT, and a panic becomes the gRPC error
// Internal "UDF_EXECUTION_ERROR(<container>): <panic value>" (<container> is
// NUMAFLOW_UD_CONTAINER_TYPE, or "reducestream") and stops the server.
package reducestreamer
