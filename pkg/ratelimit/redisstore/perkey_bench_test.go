package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/redisstore"
)

// BenchmarkTakeKeys is the Redis cost of a per-key limit: one TakeKeys, the
// one round trip of a batch, for batches whose messages have 1, 10, 100 or
// 500 distinct keys (a batch of 500 messages asks once per key). It reports
// the round trip as the caller sees it (ns/op) and the time Redis spends in
// the script (redis-us/batch, from INFO commandstats), on a redis-server of
// the benchmark's own.
func BenchmarkTakeKeys(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	client := srv.Client(b)
	s, err := redisstore.New(client, "bench", redisstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, keys := range []int{1, 10, 100, 500} {
		b.Run(fmt.Sprintf("keys-%d", keys), func(b *testing.B) {
			reqs := make([]ratelimit.KeyRequest, keys)
			for i := range reqs {
				reqs[i] = ratelimit.KeyRequest{Key: "key-" + strconv.Itoa(i), Want: 500 / keys}
			}
			granted := make([]int, keys)
			if _, err := s.TakeKeys(ctx, ratelimit.MaxTokens, reqs, granted); err != nil { // loads the script
				b.Fatal(err)
			}
			if err := client.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.TakeKeys(ctx, ratelimit.MaxTokens, reqs, granted); err != nil {
					b.Fatal(err)
				}
			}
			info, err := client.Info(ctx, "commandstats").Result()
			if err != nil {
				b.Fatal(err)
			}
			stats := infoFields(info, "cmdstat_evalsha")
			b.ReportMetric(stats["usec"]/stats["calls"], "redis-us/batch")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/500, "ns/msg")
		})
	}
}
