// Command sessionsum is a session reduce UDF that adds up the integer
// payloads of each session and keys: one result per session, with its keys
// and the sum in decimal as its payload. A payload that is not a decimal
// integer is left out, and logged. Sessions that merge add up their sums.
package main

import (
	"context"
	"log"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sluiceflow/sluice/pkg/sdk/sessionreducer"
)

func main() {
	create := sessionreducer.CreatorFunc(func() sessionreducer.SessionReducer { return &summer{} })
	if err := sessionreducer.NewServer(create).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// summer adds up one session's payloads.
type summer struct {
	total atomic.Int64
}

func (s *summer) SessionReduce(_ context.Context, keys []string, in <-chan sessionreducer.Datum) sessionreducer.Messages {
	for d := range in {
		v, err := strconv.ParseInt(strings.TrimSpace(string(d.Value())), 10, 64)
		if err != nil {
			log.Printf("sessionsum: keys %q: leaving out %q: not an integer", keys, d.Value())
			continue
		}
		s.total.Add(v)
	}
	return sessionreducer.Messages{sessionreducer.NewMessage([]byte(strconv.FormatInt(s.total.Load(), 10))).WithKeys(keys)}
}

// Accumulator is the sum so far, in decimal.
func (s *summer) Accumulator(context.Context) []byte {
	return strconv.AppendInt(nil, s.total.Load(), 10)
}

// MergeAccumulator adds the sum of a session merged into this one.
func (s *summer) MergeAccumulator(_ context.Context, acc []byte) {
	v, err := strconv.ParseInt(string(acc), 10, 64)
	if err != nil {
		log.Printf("sessionsum: an accumulator that is not a sum: %q", acc)
		return
	}
	s.total.Add(v)
}
