// Command sessioncounter is a session reduce UDF that counts the messages of
// each session and keys: one result per session, with its keys and the
// count in decimal as its payload. Sessions that merge add up their counts.
package main

import (
	"context"
	"log"
	"strconv"
	"sync/atomic"

	"github.com/sluiceflow/sluice/pkg/sdk/sessionreducer"
)

func main() {
	create := sessionreducer.CreatorFunc(func() sessionreducer.SessionReducer { return &counter{} })
	if err := sessionreducer.NewServer(create).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// counter counts one session's messages.
type counter struct {
	n atomic.Int64
}

func (c *counter) SessionReduce(_ context.Context, keys []string, in <-chan sessionreducer.Datum) sessionreducer.Messages {
	for range in {
		c.n.Add(1)
	}
	return sessionreducer.Messages{sessionreducer.NewMessage([]byte(strconv.FormatInt(c.n.Load(), 10))).WithKeys(keys)}
}

// Accumulator is the count so far, in decimal.
func (c *counter) Accumulator(context.Context) []byte {
	return strconv.AppendInt(nil, c.n.Load(), 10)
}

// MergeAccumulator adds the count of a session merged into this one.
func (c *counter) MergeAccumulator(_ context.Context, acc []byte) {
	n, err := strconv.ParseInt(string(acc), 10, 64)
	if err != nil {
		log.Printf("sessioncounter: an accumulator that is not a count: %q", acc)
		return
	}
	c.n.Add(n)
}
