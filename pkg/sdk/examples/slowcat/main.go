// Command slowcat is a map UDF that passes every message on unchanged after
// waiting SLOWCAT_DELAY (a Go duration, default 10ms) for it, as a function
// that calls a slow service would: for measuring how many messages a vertex
// keeps in flight (spec.streaming, limits.concurrency).
package main

import (
	"context"
	"fmt"
	"log"
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
	slow := func(ctx context.Context, keys []string, d mapper.Datum) mapper.Messages {
		t := time.NewTimer(delay)
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
