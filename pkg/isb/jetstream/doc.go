// Package jetstream is the inter-step buffer on NATS JetStream: the buffers
// between the vertices of a pipeline that runs across processes and
// machines. A vertex writes its output to the buffers of the next vertex with
// a [Writer] and reads its input from its own buffers with a [Reader]; both
// come from a [Conn].
//
// # Model
//
// A buffer (one partition of a vertex's input) is one JetStream stream with
// one durable pull consumer. The stream is a work queue: a message is
// deleted once acked, so the number of messages in it is exactly the number
// not yet read plus the number read and not yet acked. It refuses new
// messages beyond MaxLength (Discard New, MaxMsgs). The consumer acks
// explicitly, gives a reader AckWait to ack a message before delivering it
// again, and never limits how many messages are out at once
// (MaxAckPending = MaxLength), but for the buffer of an ordered vertex
// ([BufferSpec].Ordered), whose consumer has one message out at a time
// (MaxAckPending = 1), so that none is delivered before the one ahead of it
// is acked. All replicas of the reading vertex share the consumer, and the
// server spreads the messages among them.
//
// [Conn.CreateBuffer] creates or updates a buffer and may be called by every
// replica at start-up; [Conn.DeleteBuffer] removes one.
//
// # Naming
//
// The caller names buffers, e.g. "mypipe-myvertex-0"; the stream and its
// consumer take that name, and the stream's subject is [SubjectPrefix] plus
// the name ("sluice.mypipe-myvertex-0"). A name must not be empty nor
// contain '.', '*', '>', '/', '\' or whitespace.
//
// # Message encoding
//
// A message's body is the isb.Message (ID, keys, value, event time,
// headers) in the protocol buffers wire format; the layout is documented
// beside the code in message.go. Tags are not carried.
//
// # Frames
//
// With [Config.FrameSize] above 1, a Writer packs up to that many messages of
// a batch into one JetStream message, a frame (header Sluice-Frame), which
// cuts the server's work per message by about the frame's size. A Reader
// still returns messages one by one and never more than asked for: the rest
// of a frame waits for its next Read, kept in progress. A frame is acked once
// all of its messages are acked; if one of them is nacked, the whole frame is
// delivered again, its acked messages too. A frame's Nats-Msg-Id is made of
// its messages' IDs, so a retried write of the same frame is still dropped
// as a duplicate; but messages processed again after a crash, and grouped
// into other frames, reach the next buffer twice. The stream's MaxMsgs and
// usage count frames; a Writer turns them into messages with its own
// average frame size, so the full check is an estimate. Readers read frames
// and single messages alike; a Reader with the same FrameSize asks for as
// many frames as fill its buffer.
//
// # Reading
//
// A Reader is a [jsconsumer.Consumer] that fetches ahead, given the
// buffers' message encoding: reading, holding, acking and handing back are
// that package's, the same as a JetStream source's. It pulls from the
// consumer in batches of at most the buffer a Read is given (in frames: as
// many frames as that buffer holds). Once the
// server answers a Read's pull in full (a backlog), the Reader asks for the
// next batch at once, which arrives while the caller writes and acks this
// one; the next Read then takes it without a round trip. Only Reads of the
// largest buffer the Reader was given fetch ahead, so a caller whose reads
// a rate limiter trims takes from the buffer at most one batch more than it
// was granted. Messages fetched ahead are held like those read: kept in
// progress, and handed back when the Reader is closed. Messages read are
// decoded without copying: their values and strings alias the bodies
// received.
//
// # Offsets
//
// A message's offset ([isb.OffsetReader]) is the stream sequence of the
// JetStream message it is in: sequences grow in the order the stream stores
// messages, the messages of a frame share one, and a message delivered
// again keeps its own. [Reader.Offset] reads it from the ack reply subject
// of the JetStream message when it is received. [Writer.LastOffset] is the
// largest sequence in the server's answers to the Writer's publishes (an
// answer to a duplicate carries the sequence of the message stored first),
// so every message a Write reported stored is at or before it.
// [Reader.StartOffset] is the consumer's ack floor when the Reader was
// made: every message at or before it was acked. Watermarks pair a writer's
// watermark with its LastOffset, and a reader applies it once it has
// processed every message up to that offset.
//
// # Full detection
//
// As in Numaflow, a writer treats a buffer as full once it holds
// MaxLength*UsageLimit/100 messages: it refuses the whole batch with
// [isb.ErrBufferFull] without publishing, and the forwarder backs off. The
// count comes from the stream, read every [RefreshInterval], plus what the
// writer stored since. Several writers may together overshoot the soft limit
// between refreshes; the stream's MaxMsgs then refuses each message beyond
// MaxLength, again with [isb.ErrBufferFull].
//
// # Delivery guarantee
//
// Delivery is at least once. A message is acked only after everything made
// of it is stored downstream; [Reader.Ack] returns once the server has
// received the acks. A message not acked within AckWait (while its reader
// is alive it keeps it in progress), or held by a reader that dies, is
// delivered again, possibly to another replica, so it may be processed
// twice. Its output is then published again with the same message IDs, and
// the next buffer's duplicate window (Nats-Msg-Id = writing vertex + ":" +
// message ID; DefaultDuplicateWindow) drops those copies.
//
// Closing a Reader hands back at once every message it holds unacked.
//
// A clean server stop keeps every message and every ack the consumer has
// applied (file storage). The server applies an ack shortly after it
// receives it, so an ack received just before a stop, or a crash, may be
// lost and its message delivered again; memory storage loses its buffers on
// any restart.
//
// # Reconnects
//
// A Conn reconnects forever, every quarter second. While it is down, reads,
// writes and acks fail at once with errors matching [ErrNotConnected]
// (nothing is queued to be sent later) and the forwarder retries them; once
// it is back, the same Conn, readers and writers work again. Messages read
// before the disconnect can still be acked after it.
package jetstream
