// Command slowcat is a map UDF that passes every message on unchanged after
// waiting SLOWCAT_DELAY (a Go duration, default 10ms) for it, as a function
// that calls a slow service would: for measuring how many messages a vertex
// keeps in flight (spec.streaming, limits.concurrency). With SLOWCAT_RANDOM=1
// each message waits a random time from 0 to SLOWCAT_DELAY instead, so that
// messages mapped at once finish out of order (for ordered processing's
// tests).
package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"time"

	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

func main() {
	delay := 10 * time.Millisecond
	if v := os.Getenv("SLOWCAT_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			fmt.Fprintf(os.Stderr, "slowcat: SLOWCAT_DELAY (%q): want a duration of 0 or more, such as 10ms\n", v)
			os.Exit(2)
		}
		delay = d
	}
	random := os.Getenv("SLOWCAT_RANDOM") == "1"
	slow := func(ctx context.Context, keys []string, d mapper.Datum) mapper.Messages {
		wait := delay
		if random {
			wait = rand.N(delay + 1)
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys).WithUserMetadata(d.UserMetadata())}
	}
	if err := mapper.NewServer(mapper.MapperFunc(slow)).Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}
