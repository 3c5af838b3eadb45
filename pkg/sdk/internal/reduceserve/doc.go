// Package reduceserve serves reduce.v1.Reduce's ReduceFn for the SDK's reducer
// and reducestreamer: it splits a stream's requests into tasks, one per
// window and keys, runs user code for each in a goroutine of its own, sends
// the results as they come, and ends the stream with an EOF response once the
// client has half-closed it and every task has finished.
//
// The stream carries no handshake. A request with OPEN starts the task of its
// window and keys (or adds to it if it runs already); one with APPEND adds to
// the task, starting it if there is none, as numaflow-go's servers do. Each
// request names exactly one window; any other count, and the operation
// CLOSE, which aligned windows do not use, fail the stream with
// InvalidArgument.
package reduceserve
