package jsconsumer

import (
	"strings"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// Sequence returns the stream sequence of the JetStream message m came in,
// m being a message Read returned: the messages of a frame share theirs. A
// message delivered again keeps its sequence. It returns 0 for a message
// this Consumer did not read.
func (c *Consumer) Sequence(m *isb.ReadMessage) uint64 {
	switch h := m.Handle.(type) {
	case *heldMsg:
		return h.seq
	case *member:
		return h.h.seq
	}
	return 0
}

// Where the stream sequence is among the dot-separated tokens of an ack
// reply subject, as the server makes it and nats.go's Msg.Metadata reads it:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending>[.<token>]
//
// The first form has 9 tokens; the second at least 11.
const (
	ackTokens   = 9
	ackSeqToken = 5
	ackV2Tokens = 11
	ackV2Seq    = 7
)

// streamSeq returns the stream sequence in reply, an ack reply subject, or 0
// when reply is not one. It does not allocate.
func streamSeq(reply string) uint64 { return replyToken(reply, ackSeqToken, ackV2Seq) }

// deliveries returns how many times the message of reply, an ack reply
// subject, has been delivered, this time included, or 0 when reply is not
// one.
func deliveries(reply string) uint64 {
	return replyToken(reply, ackSeqToken-1, ackV2Seq-1)
}

// replyToken returns the number at token at (v2 in the longer form) of
// reply, an ack reply subject, or 0 when reply is not one. It does not
// allocate.
func replyToken(reply string, at, v2 int) uint64 {
	if !strings.HasPrefix(reply, "$JS.ACK.") {
		return 0
	}
	switch tokens := strings.Count(reply, ".") + 1; {
	case tokens == ackTokens:
	case tokens >= ackV2Tokens:
		at = v2
	default:
		return 0
	}
	for range at {
		reply = reply[strings.IndexByte(reply, '.')+1:]
	}
	var n uint64
	for i := range len(reply) {
		d := reply[i] - '0'
		if reply[i] == '.' && i > 0 {
			return n
		}
		if d > 9 {
			return 0
		}
		n = n*10 + uint64(d)
	}
	return 0 // the last token: not a number this reads
}
