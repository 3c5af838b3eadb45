package throttle_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/throttle"
)

// A forwarder's read under a throttle: Take before the read, Pay after it,
// and Send to hand the batch on with tokens of the epoch it goes on in.
func Example() {
	lim, err := ratelimit.New(ratelimit.Config{Max: 100, Min: 100})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close(context.Background())
	th := (&throttle.Throttle{Limiter: lim.Gate()}).With(throttle.Env{})

	ctx := context.Background()
	tok, err := th.Take(ctx, 10) // before the read: at most 10 messages
	if err != nil {
		log.Fatal(err)
	}
	batch := make([]isb.ReadMessage, 4) // the read returned 4
	tok, ok := th.Pay(ctx, tok, batch)  // after it: the 6 unused go back
	if !ok {
		log.Fatal("no tokens")
	}
	th.Send(ctx, tok, batch, func(tok throttle.Tokens, part []isb.ReadMessage) {
		fmt.Println(len(part), "messages go on with", tok.N(), "tokens")
	})
	// Output: 4 messages go on with 4 tokens
}
