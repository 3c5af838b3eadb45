// Package reduce is the state of a reduce vertex's reader: it puts what the
// reader reads into event-time windows, keeps it durable in a write-ahead
// log, and reduces each window once the watermark closes it.
//
// # Flow
//
// A [Processor] takes read batches with [Processor.Add]: each message is
// appended to the log, the log is synced, and the message is put in each
// of its windows that is still open ([window.Book]); a message whose
// windows have all closed is late and dropped. Once Add returns, the batch
// may be acked upstream. [Processor.Advance] moves the watermark and
// reduces every window it closes, per key set when the reduce is keyed,
// with the [Reducer]; the results carry the window's end less a millisecond
// as event time, and IDs made of the window and keys, so that a result
// written twice is the same message twice. Once the results are written,
// [Processor.Commit] notes the watermark in the log and removes the log's
// segments whose windows have all closed.
//
// # Reducers
//
// [Builtin] makes the built-in count and sum; [Remote] runs a user-defined
// reduce function (numaflow-go's reducers, or sluice's SDK) through a
// client of its reduce.v1 server, a stream per window and key set;
// [RemoteStream] runs a reduce streamer, a [StreamReducer]: the Processor
// sends it each message as it adds it, and what its functions send comes
// out of the next Advance, while their windows are still open, the rest
// when the watermark closes them (after a restart, which sends the open
// windows again, their early results come again, with the same IDs);
// [RemoteSession] runs a session reduce function through the one stream of
// a sessionreduce.v1 client: it is a [SessionReducer], which the Processor
// tells, as it adds each message, whether the message opened a session,
// was appended to one, expanded one or merged several, and asks to close
// each session the watermark closes. After [Processor.Recover], and after
// a call fails (the stream is gone, and the server's sessions with it),
// the open sessions are sent again, each opened with its first message and
// its others appended, before anything else.
//
// # Session windows
//
// With a [window.Session] strategy the Book keeps sessions per key set,
// which grow and merge as messages come. The log's segments and the IDs
// the log gave back are then settled by event time: they are kept until
// the oldest open session starts after them, for a session that grows
// keeps messages older than its first end.
//
// # Crash and restart
//
// [Processor.Recover] replays the log: the messages of open windows come
// back, and the windows a committed watermark closed stay closed. A reader
// killed mid-window and restarted therefore emits exactly the results a
// run without the crash emits; a window reduced but not yet committed is
// reduced again, to the same results (at least once downstream). Without a
// log (no_store), state is in memory only and a crash loses the open
// windows.
//
// # Accumulators
//
// An [Accumulator] is the Stage of an accumulator vertex: it feeds each key
// set's messages, in event-time order as the watermark passes them, to the
// key set's function on an accumulator.v1 stream, and returns what the
// functions emit. A fed message is done once an output with its ID, or one
// whose watermark is after its event time, is written; Advance logs how far
// each key set is done before the outputs are written, and Commit confirms
// it after. The log keeps only the messages not done (and a segment's
// worth more), and [Accumulator.Recover] feeds only those again: what was
// emitted and written does not come out twice, except the outputs of marks
// a crash left unconfirmed, which [Accumulator.InDoubt] counts.
//
// # The loop
//
// A [Loop] is one reader of a reduce vertex: it takes tokens for a batch
// from its limiter (a rate limit applies to a reduce's reads as to any
// vertex's), reads a partition, adds the batch to its Processor, acks it,
// and writes the results of the windows the watermark closes, and what a
// reduce streamer has sent, trying a failed write again until it succeeds,
// before it commits them and reads again. Throttling
// delays reads, and so the windows' closes, but never changes a result.
//
// A Processor is not safe for concurrent use: one reader owns it.
package reduce
