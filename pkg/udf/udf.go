// Package udf is the runtime's side of functions: the stages a vertex calls
// ([Mapper], [Forker]), the built-in map functions (cat, filter, eventtime),
// and what the clients of user-defined functions share.
//
// # Clients
//
// Each client of a user-defined function is a package of its own under
// pkg/udf, named after the Numaflow gRPC service it calls:
//
//	mapclient            map.v1 (map, batch map, map stream) and sourcetransformer.v1: a [Mapper]
//	reduceclient         reduce.v1 (reduce and reduce stream)
//	sessionreduceclient  sessionreduce.v1
//	accumulatorclient    accumulator.v1
//	sourceclient         source.v1: an isb.Reader
//	sinkclient           sink.v1 (sink, fallback and on-success sinks): an isb.Writer
//	sideinputclient      sideinput.v1: a sideinputs.Retriever
//
// A client finds its server in a directory by the server-info file and socket
// of its [Kind], waits for it, checks that it speaks a protocol sluice
// understands (else an error matching [ErrIncompatible]), and connects again
// after a failure. Every call has a deadline, the timeout of the calls
// [WithCalls] makes it part of (limits.udfTimeout; 60 s by default), measured
// from when the call starts on a connected server: past it the call is
// abandoned with an error matching [ErrDeadline], the connection is kept,
// and the caller's retry opens a new stream on it. Answers that break the
// service's framing give an error matching [ErrProtocol].
//
// A source transformer is a [Mapper] too.
package udf

import (
	"context"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// Mapper applies a map function to a batch.
//
// Map appends to out the messages that in produces, in order, and returns out and
// how many messages of in were dropped: produced nothing because the function
// marked them to drop. A message may produce zero, one or many messages. Map keeps
// neither in nor out after it returns; the payloads of out may share memory with
// those of in. An error is for the whole batch, which may be retried.
//
// Every message produced carries the Origin of the message it came from. A
// function that rejects a message (a nack) produces, in its place, one
// message with Nack set and nothing else; such a message is not a drop. A
// function that fails a message, to have it tried again (Numaflow's
// [FailTag]), produces in its place the input itself with FailTag appended
// to its tags ([Failed] tells it, [Unfail] gives back the input); nor is that
// a drop.
type Mapper interface {
	Map(ctx context.Context, in []isb.Message, out []isb.Message) ([]isb.Message, int, error)
}

// FailTag marks the result of an input a map or a transformer failed: the
// input is to be tried again, as the function's retryStrategy says, instead
// of any of its results being written. Numaflow's reserved tag: the literal
// text "U+005C__FAIL__".
const FailTag = "U+005C__FAIL__"

// Failed reports whether m is the input of a failed call, as a [Mapper]
// gives it back: its last tag is FailTag.
func Failed(m *isb.Message) bool {
	return len(m.Tags) > 0 && m.Tags[len(m.Tags)-1] == FailTag
}

// Fail returns in as a Mapper gives back an input it failed: in, with
// FailTag appended to its tags (in's own tags are not written to).
func Fail(in isb.Message) isb.Message {
	in.Tags = append(in.Tags[:len(in.Tags):len(in.Tags)], FailTag)
	return in
}

// Unfail returns the input a failed message stands for: m without the
// FailTag that Fail appended.
func Unfail(m isb.Message) isb.Message {
	if Failed(&m) {
		if m.Tags = m.Tags[:len(m.Tags)-1]; len(m.Tags) == 0 {
			m.Tags = nil
		}
	}
	return m
}
