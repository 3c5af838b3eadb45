// Package reducer serves a reduce user-defined function (UDF) over Numaflow's
// gRPC protocol: the function gets the messages of one window and keys on a
// channel and returns its results once the window has ended.
//
//	func main() {
//		err := reducer.NewServer(reducer.ReducerFunc(count)).Start(context.Background())
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Where numaflow-go's reducer has a creator that makes a Reducer for each
// window and keys, this package calls one Reducer once per window and keys: a
// window's state lives in the call (see the counter and sum examples).
// Metadata and IntervalWindow are plain values (md.IntervalWindow.Start and
// End).
//
// # Wire
//
// The server listens on the unix socket reduce.sock and, once it listens,
// writes the server-info file reducer-server-info. It serves
// reduce.v1.Reduce. A ReduceFn stream has no handshake: each request carries
// one message and a window operation naming one window, OPEN for the first
// message of a window and keys and APPEND for the rest (an APPEND for a window
// and keys not open yet opens them). The server calls Reduce once per window
// and keys, and the client ends every window of the stream by half-closing
// it. Each result goes out as a response with its window (as the request named
// it, slot included) as soon as its Reduce has returned; once every call has
// returned, a last response has EOF set. A request naming no window or several,
// or with the operation CLOSE, fails the stream with InvalidArgument.
//
// # Socket directory and stopping
//
// As in package mapper: WithSocketDir, else SLUICE_UDS_DIR (set by `vertex
// run --spawn`), else /var/run/numaflow; Start returns after a graceful stop
// on context end, SIGTERM or SIGINT, and a panic becomes the gRPC error
// Internal "UDF_EXECUTION_ERROR(<container>): <panic value>" (<container> is
// NUMAFLOW_UD_CONTAINER_TYPE, or "reduce") and stops the server.
package reducer
