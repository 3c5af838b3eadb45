// Command streamcounter is a reduce streamer UDF that counts the messages of
// each window and keys as they come: each time it has counted
// STREAMCOUNTER_EVERY (default 10) more, it sends that count at once, with
// the window still open, and when the window ends it sends what is left
// (0 included). The counts of a window and keys add up to its messages.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/sluiceflow/sluice/pkg/sdk/reducestreamer"
)

func main() {
	every, err := everyFromEnv(os.Getenv("STREAMCOUNTER_EVERY"))
	if err != nil {
		log.Fatal(err)
	}
	srv := reducestreamer.NewServer(reducestreamer.ReduceStreamerFunc(func(ctx context.Context, keys []string, in <-chan reducestreamer.Datum, out chan<- reducestreamer.Message, _ reducestreamer.Metadata) {
		count(ctx, every, keys, in, out)
	}))
	if err := srv.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// everyFromEnv reads STREAMCOUNTER_EVERY: a positive integer, 10 when
// empty.
func everyFromEnv(v string) (int, error) {
	if v == "" {
		return 10, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("streamcounter: STREAMCOUNTER_EVERY (%q) must be a positive integer", v)
	}
	return n, nil
}

// count sends every messages' count as it reaches it, and the rest at the
// end of the window.
func count(ctx context.Context, every int, keys []string, in <-chan reducestreamer.Datum, out chan<- reducestreamer.Message) {
	send := func(n int) bool {
		select {
		case out <- reducestreamer.NewMessage([]byte(strconv.Itoa(n))).WithKeys(keys):
			return true
		case <-ctx.Done():
			return false
		}
	}
	n := 0
	for range in {
		if n++; n == every {
			if !send(n) {
				return
			}
			n = 0
		}
	}
	send(n)
}
