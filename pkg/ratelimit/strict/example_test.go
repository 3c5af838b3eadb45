package strict_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/strict"
)

// Wrap makes a function that calls a shared API at most once every 200ms, across
// every process that uses the same Redis key. By default a call waits for its
// permit; with strict.Reject() it fails fast instead.
func ExampleWrap() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	limiter, err := strict.New(client, "example:api", strict.Config{Interval: 200 * time.Millisecond, MaxReserved: 2})
	if err != nil {
		log.Fatal(err)
	}
	callAPI := func(_ context.Context, n int) (string, error) { return fmt.Sprintf("call %d: ok", n), nil }

	waiting := strict.Wrap(limiter, callAPI)                   // waits for its permit
	failFast := strict.Wrap(limiter, callAPI, strict.Reject()) // or fails at once

	out, err := waiting(context.Background(), 1)
	fmt.Println(out, err)
	if _, err := failFast(context.Background(), 2); errors.Is(err, ratelimit.ErrRateLimited) {
		fmt.Println("call 2: rate limited:", err)
	}
}
