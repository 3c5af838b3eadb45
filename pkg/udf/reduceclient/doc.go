// Package reduceclient is the runtime's side of the reduce.v1 wire: a [Client]
// reaches a reduce or reduce-stream UDF server on its unix socket, and a
// [Stream] carries one window to it and brings the window's results back.
//
// # The wire
//
// A window goes over a ReduceFn stream of its own, with no handshake. The
// first message of each keys in the window is sent with the window operation
// OPEN, the rest with APPEND, each naming the window (start, end, slot).
// Half-closing the stream ends the window: the server finishes its function
// for each keys and answers with the results, each naming its window, and then
// one response with EOF set, after which it ends the stream. A reduce-stream
// server may answer before the window ends.
//
// # Results
//
// A [Result] carries the event time of its window's end less one
// millisecond, as Numaflow gives the results of a window, with the keys,
// value, tags and user metadata the function gave it. A result tagged
// [DropTag] is to be dropped; the caller decides.
//
// # Errors
//
// Errors name the window. A failure of the server (a gRPC status, such as the
// Internal "UDF_EXECUTION_ERROR(...)" of a function that panicked) is wrapped
// as it came, so that status.Code reads it, and the connection is dropped, to
// be made again, once the server is back, by the next window. A server that
// breaks the framing (a result of another window, a stream that ends without
// EOF, or answers after EOF) gives an error matching [udf.ErrProtocol]. A window the
// server does not answer within the deadline of its call (see udf,
// Clients) gives an error matching [udf.ErrDeadline]; its stream is
// cancelled and the connection kept. Nothing is retried here: a window that
// failed is sent again whole by the caller.
package reduceclient
