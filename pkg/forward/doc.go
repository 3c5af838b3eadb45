// Package forward is the forwarder loop that every vertex runs. One iteration is a
// few visible steps:
//
//	take tokens             Deps.Throttle.Take: message tokens (TryAcquire, or
//	                        Acquire when it grants none) and those of each group
//	read at most that many  Reader.Read
//	pay                     Deps.Throttle.Pay: the unused go back to their epoch;
//	                        with Bytes or Cost, the payload bytes and the cost
//	                        beyond a token a message, all of one epoch
//	late read?              Throttle.Send: its epoch ended, so the current
//	                        epoch's tokens instead
//	after an empty read     pause 1ms, doubling up to Options.MaxIdlePause
//	process                 the source transformer and the UDF; what they
//	                        fail (udf.Failed) is retried as Options.TransformRetry
//	                        and MapRetry say (retry.go)
//	write                   the sink, or the fallback sink, on tokens of the
//	                        epoch the write starts in; a write that returns in
//	                        a later epoch takes that epoch's tokens too
//	ack                     Reader.Ack, only after the write is durable
//
// Tokens belong to their epoch: tokens of a second that has passed are never
// spent, so that a downstream that counts per second never sees more than the
// limit, whatever blocked across a boundary (see throttle.Throttle.Send). A message
// delivered again after a nack takes a token again, whether the reader takes
// it back or the forwarder delivers it again itself.
//
// While the limiter has no tokens the forwarder waits and a [Tracker] counts why
// (a ratelimit.Reason, also downstream_full while the sink is full, and
// downstream_throttled while it waits as long as a sink that refused messages
// with isb.ErrThrottled asked). On shutdown
// reads stop, the batches in flight are written and acked within the shutdown
// timeout, and a batch still unacked at that deadline is logged and nacked (when
// the reader is an isb.Nacker) so that it is delivered again at once.
//
// One loop takes tokens and reads, in every mode (loop.go), and hands each
// batch to a worker that processes, writes and acks it. By default the
// worker runs in the loop's goroutine, one batch at a time. With Options.ReadAhead the
// next batch is read while the current one is processed and written, and with
// Options.Streaming up to Options.Concurrency messages are in flight, each
// batch processed by forks of the functions and acked as soon as it is
// written. Either way one goroutine acquires and reads, so a grant's tokens
// are still taken before its read and its unused ones deposited at once.
//
// With Options.Ordered (ordered processing) the forwarder moves one message
// at a time and reads the next only once the last is written and acked: no
// read-ahead, no streaming, and a nacked message is delivered again in
// place, so the order read is the order written.
package forward
