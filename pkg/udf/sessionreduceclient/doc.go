// Package sessionreduceclient is the client of a user-defined session reduce
// function: a server of sessionreduce.v1.SessionReduce, such as one built
// with numaflow-go's sessionreducer package or sluice's
// pkg/sdk/sessionreducer.
//
// # Stream
//
// A [Client] keeps one bidirectional stream for the vertex, opened on the
// first operation. The runtime owns the sessions: it tells the server each
// step with an operation on a [KeyedWindow] (a session's interval and keys)
// — [Client.Open] a session with its first message, [Client.Append] a
// message, [Client.Expand] a session to a new window with a message,
// [Client.Merge] sessions into one, and [Client.CloseSessions], which
// returns the results of each once the server has sent them and an EOF for
// it. The server keys its sessions by the milliseconds of start and end
// and the keys, so a window is named the same way in every operation.
//
// [Client.Reduce] is a whole session at once: Open with the first message,
// Append the others, and Close.
//
// # Failures
//
// When the stream fails, every operation waiting on it, and the next
// operation, return an error matching [ErrStream]: the sessions the server
// held are gone. The operation after opens a new stream, on which the
// caller sends its sessions again. Answers that break the session reduce
// framing (a result of a session not being closed, or a stream that ends
// with sessions still to answer) give an error matching [udf.ErrProtocol].
package sessionreduceclient
