// Package jsconsumer reads a NATS JetStream stream through a durable pull
// consumer, at least once: the one reader behind sluice's inter-step
// buffers on JetStream (package isb/jetstream) and its JetStream source
// (package source). Each of them makes the consumer (or finds it), says
// with a [DecodeFunc] what a JetStream message holds, and reads, acks and
// nacks through a [Consumer].
//
// # Model
//
// A [Consumer] reads through one durable pull consumer, which it neither
// creates nor changes; replicas that read through the same durable, in one
// process or many, share its messages: the server gives each message to one
// of them. The durable acks explicitly and gives a reader its ack wait to
// ack a message before it delivers it again. A Consumer keeps every message
// it holds (read, and neither acked nor nacked) in progress, so that a slow
// batch is not delivered again while its reader works on it.
//
// # Reading
//
// Read returns at most len(buf) messages. It first takes what is there
// without waiting; when that is nothing it waits up to the read timeout (or
// until ctx is done) for one message, then takes what else is there without
// waiting. At low load a message is returned as soon as it arrives; at high
// load a Read is one round trip. The wait is made of pull requests of at
// most a second: when ctx is done during one, Read returns at once, and a
// message the server still delivers to that request is handed back at once
// rather than left until the ack wait.
//
// With [Options.FetchAhead], a Read whose pull the server answered in full
// (a backlog), with a buf as large as any the Consumer was given, asks at
// once for the next batch of that size, which is on its way while the
// caller processes this one; the next Read takes it without a round trip.
// So a caller whose reads are trimmed, as by a rate limiter's grant, takes
// from the stream at most one batch more than it was granted. Without
// FetchAhead a Consumer never asks for more than a Read has room for.
//
// # Frames
//
// A JetStream message may carry several messages, a frame: its DecodeFunc
// returns them all. Read still returns messages one by one and never more
// than asked for: the rest of a frame waits for the next Read, held. A
// frame is acked once all of its messages are acked; if one of them is
// nacked, the whole frame is delivered again, its acked messages too. With
// [Options.FrameSize] a pull asks for as many JetStream messages as the
// Read has room for when they are full frames.
//
// # Stream sequences
//
// [Consumer.Sequence] returns the stream sequence of the JetStream message a
// message read came in, as its ack reply subject carries it: the messages
// of a frame share one, and a message delivered again keeps its own.
// Sequences grow in the order the stream stores messages.
//
// # Delivery guarantee
//
// Delivery is at least once. Ack returns once the server has received the
// acks (with [Options.ConfirmAcks]: once it has confirmed each one), so
// that nothing acked before a disconnect is delivered again; Nack returns
// once the server has received the NAKs. A message not acked within the
// ack wait while its Consumer is alive is kept in progress; one held by a
// process that dies is delivered again once the ack wait has passed,
// possibly to another replica. Close hands back at once every message held,
// fetched ahead or not yet returned.
//
// A message its DecodeFunc cannot decode is terminated (the server drops it,
// and does not deliver it again) and reported by Read with [ErrDecode].
//
// # Reconnects
//
// A Consumer works over a connection its caller made, which reconnects by
// itself. While it is down, reads, acks and nacks fail at once with errors
// matching [ErrNotConnected] (nothing is queued to be sent later), and the
// caller retries them; once it is back, the same Consumer works again, and
// messages read before the disconnect can still be acked.
package jsconsumer
