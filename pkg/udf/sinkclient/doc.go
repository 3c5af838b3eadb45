// Package sinkclient is the runtime's side of the sink.v1 wire: a [Client]
// writes batches to a user-defined sink, a fallback sink or an on-success
// sink on its unix socket. It is an [isb.Writer].
//
// # The wire
//
// A batch goes over a long-lived SinkFn stream that opens with a handshake
// the server echoes. Each message of the batch is a request with an ID of its
// own in the batch, carrying the watermark [Client.SetWatermark] gives; an
// end-of-transmission request ends the batch. The server answers each ID with
// a status and then ends the batch with an end of transmission of its own.
//
// # Statuses
//
// Each message's status becomes its entry in Write's errs: nil for SUCCESS
// (and SERVE), [isb.ErrFallback] for FALLBACK, an [*isb.NackError] for NACK,
// an [*isb.OnSuccessError] for ON_SUCCESS, and an error for FAILURE, retried
// by the forwarder. A FAILURE whose message begins with [RateLimitedMarker]
// is a throttle signal instead, an [*isb.ThrottledError], and the messages in
// flight at once get an AIMD limit (see [Client.Write]).
//
// # Errors
//
// An answer for an ID not in the batch, or an end of the batch with messages
// unanswered, gives an error matching [udf.ErrProtocol]. A batch the server
// does not answer within the deadline of its call (see udf, Clients) gives an
// error matching [udf.ErrDeadline].
package sinkclient
